#!/usr/bin/env python3
"""Summarises which Kafka APIs, at which versions, each client used against the reference broker.

Start the reference broker with KAFKA_REF_REQUEST_LOG=1 (it then logs every request to
.kafka-ref/logs/requests.log), run suites against it, then run this before stop.sh wipes the
logs. Prints, per client id, the client software it announced in ApiVersions, each API with
{version: count}, and the non-zero error codes Kafka answered. Requests the broker forwarded
to its own controller (CreateTopics from auto-creation) are counted too, under the client id
of the request that caused them. Standard library only.

Usage: compat/kafka-ref/request-summary.py [path/to/requests.log]
"""

import collections
import json
import pathlib
import re
import sys

MARK = "Completed request:"
# Client ids that end in a counter (producer-1, adminclient-7...) are grouped.
COUNTER = re.compile(r"-\d+$")


def main():
    root = pathlib.Path(__file__).resolve().parents[2]
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else (
        root / ".kafka-ref/logs/requests.log")
    apis = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    software = collections.defaultdict(set)
    errors = collections.defaultdict(collections.Counter)
    with open(path, encoding="utf-8") as f:
        for line in f:
            at = line.find(MARK)
            if at < 0:
                continue
            entry = json.loads(line[at + len(MARK):])
            header = entry["requestHeader"]
            client = COUNTER.sub("-N", header.get("clientId") or "(none)")
            api = header["requestApiKeyName"]
            apis[client][api][header["requestApiVersion"]] += 1
            if api == "API_VERSIONS":
                req = entry.get("request") or {}
                software[client].add(
                    f"{req.get('clientSoftwareName')} {req.get('clientSoftwareVersion')}")
            for code in re.findall(r'"errorCode": ?(-?\d+)', json.dumps(entry.get("response"))):
                if code != "0":
                    errors[client][f"{api}={code}"] += 1
    for client in sorted(apis):
        print(f"{client}  [{', '.join(sorted(software[client]))}]")
        for api, versions in sorted(apis[client].items()):
            print(f"    {api:30} {dict(sorted(versions.items()))}")
        if errors[client]:
            print(f"    non-zero error codes: {dict(sorted(errors[client].items()))}")


if __name__ == "__main__":
    main()
