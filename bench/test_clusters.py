"""Unit tests of what bench/hwbench writes for the nodes it starts: the highwater cluster
configs (config/cluster/node-N.toml with this run's ports, voters and data dir) and the
Kafka server.properties of one node or of three."""

from __future__ import annotations

import unittest
from pathlib import Path

from hwbench.brokers import KAFKA_COMMON_PROPERTIES, kafka_properties
from hwbench.clusters import HIGHWATER_CLUSTER_CONFIGS, highwater_node_config
from hwbench.errors import BenchError


class HighwaterNodeConfig(unittest.TestCase):
    def test_ports_voters_and_data_dir_are_replaced_and_nothing_else(self):
        voters = "1@127.0.0.1:41001,2@127.0.0.1:41002,3@127.0.0.1:41003"
        for node in (1, 2, 3):
            with self.subTest(node=node):
                template = (HIGHWATER_CLUSTER_CONFIGS / f"node-{node}.toml").read_text()
                text = highwater_node_config(template, 40000 + node, 41000 + node, voters,
                                             Path(f"/tmp/s/node-{node}/data"))
                lines = text.splitlines()
                self.assertIn(f'listeners = "PLAINTEXT://127.0.0.1:{40000 + node},'
                              f'CONTROLLER://127.0.0.1:{41000 + node}"', lines)
                self.assertIn(f'"controller.quorum.voters" = "{voters}"', lines)
                self.assertIn(f'"log.dirs" = "/tmp/s/node-{node}/data"', lines)
                self.assertIn(f'"node.id" = {node}', lines)
                changed = set(lines[1:]) ^ set(template.splitlines())
                self.assertEqual(len(changed), 6)  # three lines out, three in
                self.assertNotIn("9092", text)

    def test_a_template_without_one_of_the_lines_is_refused(self):
        template = (HIGHWATER_CLUSTER_CONFIGS / "node-1.toml").read_text()
        broken = "\n".join(line for line in template.splitlines()
                           if not line.startswith('"log.dirs"'))
        with self.assertRaisesRegex(BenchError, "log"):
            highwater_node_config(broken, 1, 2, "v", Path("/d"))
        with self.assertRaisesRegex(BenchError, "found 2"):
            highwater_node_config(template + '\nlisteners = "x"\n', 1, 2, "v", Path("/d"))


class KafkaProperties(unittest.TestCase):
    def test_a_combined_node_with_its_quorum_line(self):
        text = kafka_properties(2, 40002, 41002, "controller.quorum.voters=1@x:1,2@x:2",
                                Path("/tmp/s/node-2/data"))
        lines = text.splitlines()
        for line in ("process.roles=broker,controller", "node.id=2",
                     "listeners=PLAINTEXT://127.0.0.1:40002,CONTROLLER://127.0.0.1:41002",
                     "advertised.listeners=PLAINTEXT://127.0.0.1:40002",
                     "controller.quorum.voters=1@x:1,2@x:2", "log.dirs=/tmp/s/node-2/data"):
            self.assertIn(line, lines)
        self.assertTrue(text.endswith(KAFKA_COMMON_PROPERTIES))


if __name__ == "__main__":
    unittest.main()
