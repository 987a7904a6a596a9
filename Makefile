# highwater — the commands users and CI rely on. See README.md.
CONFIG ?= config/server.toml
BOOTSTRAP ?= 127.0.0.1:9092
CARGO ?= cargo

.PHONY: build run cluster cluster-split test lint unit examples bench-dev bench-efficient bench-security bench-partitions bench-partitions-cluster compat compat-cluster compat-cluster-kafka-ref compat-storage compat-deps kafka-ref kafka-ref-stop compat-kafka-ref compat-tls compat-acl conformance conformance-fast fmt clippy fuzz simulate chaos

build:
	$(CARGO) build --release

run: build
	./target/release/highwater serve --config $(CONFIG)

# The style gate, unit and integration tests, then every compat suite against a freshly started highwater,
# then Apache Kafka's DumpLogSegments over segments highwater wrote, then a one-minute run
# of the benchmark machinery against both brokers.
test: lint unit examples compat compat-cluster compat-storage compat-tls compat-acl conformance-fast bench-smoke

# The style gate (issue 17): formatting, every clippy and rustc lint of Cargo.toml, and
# the API docs (no broken intra-doc link), warnings as errors.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --quiet
	# The fuzz targets (their own crate, not built otherwise) still compile.
	$(CARGO) check --manifest-path fuzz/Cargo.toml --bins --quiet

# Three combined nodes (config/cluster/node-*.toml: clients on 127.0.0.1:9092-9094, the
# quorum on 9192-9194, data under ./data/node-*), in the foreground; ctrl-c stops all.
CLUSTER ?= config/cluster/node-1.toml config/cluster/node-2.toml config/cluster/node-3.toml
cluster: build
	@pids=""; trap 'kill $$pids 2>/dev/null; wait' INT TERM; \
	for file in $(CLUSTER); do ./target/release/highwater serve --config $$file & pids="$$pids $$!"; done; \
	wait

# Three brokers and three separate controllers (config/cluster/split/).
cluster-split:
	$(MAKE) cluster CLUSTER="$$(ls config/cluster/split/controller-*.toml config/cluster/split/broker-*.toml)"

unit:
	$(CARGO) test --all-targets

# examples/rdkafka-consumer: a user's crate testing a real rdkafka consumer against
# highwater::testkit (builds librdkafka from source the first time, ~2 minutes).
examples:
	cd examples/rdkafka-consumer && CARGO_TARGET_DIR=$(CURDIR)/target/examples $(CARGO) test

compat-deps:
	./compat/install-deps.sh

# The multi-process fault test (tests/chaos.rs) for CHAOS_SECS of faults (CHAOS_FAULTS:
# any of kill, pause, partition, disk; partitions and full disks need root), replaying
# CHAOS_SEED if given; make test runs it for 120 s with all four. Its processes, network
# namespaces and tmpfs mounts are removed when it ends; a failing run keeps data and logs.
CHAOS_SECS ?= 600
CHAOS_FAULTS ?= kill,pause,partition,disk
chaos:
	HIGHWATER_CHAOS_SECS=$(CHAOS_SECS) HIGHWATER_CHAOS_FAULTS=$(CHAOS_FAULTS) \
	$(if $(CHAOS_SEED),HIGHWATER_CHAOS_SEED=$(CHAOS_SEED)) \
	$(CARGO) test --test chaos -- --nocapture

# The seeded replication simulator (tests/simulator.rs) over SIM_SEEDS seeds from SIM_BASE
# (make test runs seeds 0-199); a failing seed prints itself: replay it with
# HIGHWATER_SIM_SEED=<seed> cargo test --test simulator -- --nocapture.
SIM_SEEDS ?= 3000
SIM_BASE ?= 0
simulate:
	HIGHWATER_SIM_SEEDS=$(SIM_SEEDS) HIGHWATER_SIM_BASE=$(SIM_BASE) $(CARGO) test --test simulator -- --nocapture

# Starts a throwaway highwater on a free port with a temporary data dir and runs all suites.
compat: build compat-deps
	./compat/with-highwater.sh ./compat/run-all.sh

# kcat and the Java AdminClient against a three-node cluster of its own, before and after a
# kill -9 of a partition leader, and Kafka's kafka-reassign-partitions while all three are up
# (compat/cluster/run.sh, which runs compat/cluster/reassign.sh; the two reassign tests
# highwater still fails are left out, compat/README.md "Partition reassignment").
compat-cluster: build compat-deps
	./compat/cluster/run.sh

# Apache Kafka's DumpLogSegments reads the segments and indexes highwater wrote (own broker).
compat-storage: build compat-deps
	./compat/storage/run.sh

# Apache Kafka 4.x (KRaft, single node) from Maven Central, as the reference broker.
kafka-ref: compat-deps
	./compat/kafka-ref/start.sh

kafka-ref-stop:
	./compat/kafka-ref/stop.sh

# Runs every compat suite against the reference Apache Kafka; the restart tests restart it
# through compat/kafka-ref/restart.sh. Then the TLS, ACL and reassignment suites (below).
compat-kafka-ref: compat-deps
	./compat/kafka-ref/start.sh
	COMPAT_RESTART_BROKER=$(CURDIR)/compat/kafka-ref/restart.sh ./compat/run-all.sh $$(cat .kafka-ref/bootstrap); rc=$$?; ./compat/kafka-ref/stop.sh; exit $$rc
	./compat/tls/run.sh kafka
	./compat/tls/cluster.sh kafka
	./compat/acl/run.sh kafka
	./compat/kafka-ref/cluster.sh run ./compat/cluster/reassign.sh

# Kafka's kafka-reassign-partitions (compat/cluster/reassign.sh, all six tests) against a
# three-node Apache Kafka 4.1.1 that compat/kafka-ref/cluster.sh starts, then stops and wipes,
# then compat/cluster/fetch_from_follower.py against another in racks rack-1..3 (~2 min).
# Never part of `make test`; `make compat-cluster` runs both against highwater.
compat-cluster-kafka-ref: compat-deps
	./compat/kafka-ref/cluster.sh run ./compat/cluster/reassign.sh
	KAFKA_REF_EXTRA_CONFIG="$$(printf 'broker.rack=rack-@NODE@\nreplica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector')" \
		./compat/kafka-ref/cluster.sh run ./compat/.venv/bin/python ./compat/cluster/fetch_from_follower.py

# kcat, confluent-kafka and Kafka's console tools over TLS and mTLS against a highwater with
# PLAINTEXT, SSL and client-authenticating SSL listeners of its own (compat/tls/run.sh, ~70 s);
# then three nodes replicating over a SASL_SSL inter-broker listener (compat/tls/cluster.sh,
# ~20 s).
compat-tls: build compat-deps
	./compat/tls/run.sh highwater
	./compat/tls/cluster.sh highwater

# kafka-acls, confluent-kafka and kcat with Kafka's StandardAuthorizer: SASL users and mTLS
# certificate subjects as principals (compat/acl/run.sh).
compat-acl: build compat-deps
	./compat/acl/run.sh highwater

# The clients' own integration suites, franz-go's pkg/kgo tests and librdkafka's tests/
# (Debian's 2.0.2 source, fetched on first use), against Apache Kafka 4.1.1 and then a
# throwaway highwater, one broker at a time; prints test | Kafka | highwater
# (compat/conformance/run.sh, compat/README.md "Conformance"). Long; never part of `make test`.
conformance: build compat-deps
	./compat/conformance/run.sh

# The fast subsets of franz-go's pkg/kgo integration tests (compat/conformance/kgo.sh --fast:
# 18 tests, 10,000 records, ~40 s) and of librdkafka's (compat/librdkafka/fast.sh: 17 test
# numbers, ~1 min, plus ~3 min to fetch and build them the first time), each against a
# throwaway highwater; part of `make test`.
conformance-fast: build compat-deps
	./compat/with-highwater.sh bash -c './compat/conformance/kgo.sh "$$0" --fast'
	./compat/librdkafka/fast.sh

# Fuzzes FUZZ_TARGET (cargo-fuzz, nightly) for FUZZ_SECONDS: request decoding and handling
# (`request`, the default) or a client's stream on a SASL listener (`sasl`).
FUZZ_SECONDS ?= 300
FUZZ_TARGET ?= request
fuzz:
	FUZZ_TARGET=$(FUZZ_TARGET) ./fuzz/run.sh $(FUZZ_SECONDS)

# highwater against Apache Kafka 4.1.1, side by side (bench/README.md): alternating rounds of
# ProducerPerformance, consumers and end-to-end latency on one node, then RF=3 vs RF=1 on
# three-node clusters of each; ~28 min; writes bench/results/. Never part of `make test`.
.PHONY: bench bench-smoke bench-rf3
bench: build compat-deps
	./bench/run.sh full

# Only the RF=3 vs RF=1 section (~8 min); writes bench/results/<date>-rf3.{md,json}.
bench-rf3: build compat-deps
	./bench/run.sh rf3

# The same machinery with one short round and tiny workloads, RF=3 on a three-node highwater
# cluster only (~1.5 min); fails if a broker or a tool fails, the cluster does not form or a
# figure is missing. Writes nothing tracked (bench/.venv is ignored). First the unit tests of
# the benchmark package (bench/test_*.py: parsers, records, figures, report, clusters,
# sessions, its layering, and that every module defines the names it reads).
bench-smoke: build compat-deps
	python3 -m unittest discover -s bench -p 'test_*.py'
	./bench/run.sh smoke

# The test-broker figures (issue 14): highwater dev's start, idle RSS, --nodes 3 to a
# replicated topic, and the metrics endpoint's cost on produce (~6 min); writes
# bench/results/<date>-dev.{md,json}.
bench-dev: build compat-deps
	python3 bench/dev.py

# The broker's own ceiling (issue 16): bench/loadgen (franz-go, built from the Go module
# proxy) against highwater and Apache Kafka 4.1.1: one node at 100 B / 1 KiB, acks 1 / all,
# 1 / 64 partitions, produce and consume, with broker and client CPU per GB; three nodes,
# RF=3 against RF=1; latency at linger.ms 0 and 1 at fixed rates (~20 min); writes
# bench/results/<date>-efficient.{md,json}. Never part of `make test`.
bench-efficient: build compat-deps
	python3 bench/efficient.py

# What TLS and SASL cost (issue 15): one node of highwater and of Apache Kafka 4.1.1 with
# PLAINTEXT, SSL and SASL_SSL (PLAIN) listeners on the same keys; bench/loadgen produces
# 1 KiB records and consumes them over each: throughput and broker CPU per GB against
# PLAINTEXT (~5 min); writes bench/results/<date>-security.{md,json}. Never part of `make test`.
bench-security: build compat-deps
	python3 bench/security.py

# Many partitions on one node (issue 16): 1,000 and 10,000 partitions (RF=1) on highwater and
# Apache Kafka 4.1.1: creation, idle CPU and memory per partition, Metadata for all topics,
# keyed produce and a 10-member group over 1,000, a clean restart with 10,000 (~13 min);
# writes bench/results/<date>-partitions.{md,json}. Never part of `make test`.
bench-partitions: build compat-deps
	python3 bench/partitions.py

# The same on three nodes of each, RF=3, with a node's restart until back in every ISR
# (bench/partitions_cluster.py, about 25 minutes).
bench-partitions-cluster: build compat-deps
	python3 bench/partitions_cluster.py

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --all-targets -- -D warnings
