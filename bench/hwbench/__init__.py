"""highwater against Apache Kafka 4.1.1 on one machine, with Kafka's own perf tools
(bench/README.md says what a run does). `python -m hwbench full|smoke|rf3|txn|render`;
bench/run.sh runs it in bench/.venv; bench/dev.py, efficient.py and partitions.py reuse
its process, probe and broker parts.

Modules, each importing only those before it (bench/test_layers.py checks): errors;
parsers (what is read from each tool's output and from /proc, pure); records (typed
results and their JSON); processes (spawning, stopping and measuring processes) and
watchdog (the process that kills them if this one dies); probes (free ports, the Metadata
probe); plans (workloads, what each mode runs); context (paths, JVM settings, what every
session needs); brokers (one highwater or Kafka node) and clusters (three of each); tools
(Kafka's perf tools and bench/java's BenchTool); sessions (the pipeline: rounds of
sessions on one node or three, RF a parameter of the runs); figures (table rows, ratios,
goals, smoke checks); report (markdown, json, png); main (the command line); standalone (what the other
benchmarks share: options, a work directory always removed, results' meta).
"""
