"""Unit tests of bench/security.py's table: throughput and CPU per GB per listener, and
each broker's cost over a secured listener against its own PLAINTEXT figure."""

from __future__ import annotations

import unittest
from pathlib import Path

from security import client_flags, table


def run(mb: float, cpu: float) -> dict:
    # 1 KiB records: `mb` MB in one second, `cpu` broker seconds for it.
    records = int(mb * 1e6 / 1024)
    return {"records": records, "bytes": records * 1024, "seconds": 1.0,
            "broker_cpu_s": cpu, "client_cpu_s": 0.5, "errors": 0}


def runs_of(broker: str, listener: str, mb: float, cpu: float) -> dict:
    return {"broker": broker, "round": 0, "listener": listener,
            "produce": run(mb, cpu), "consume": run(mb, cpu)}


class Table(unittest.TestCase):
    def test_a_secured_listener_is_compared_with_the_same_brokers_plaintext(self):
        runs = [runs_of("highwater", "PLAINTEXT", 100, 0.1),
                runs_of("highwater", "SSL", 100, 0.15),
                runs_of("highwater", "SASL_SSL", 100, 0.2),
                runs_of("kafka", "PLAINTEXT", 50, 0.2),
                runs_of("kafka", "SSL", 25, 0.4),
                runs_of("kafka", "SASL_SSL", 25, 0.4)]
        row = next(line for line in table(runs) if line.startswith("| SSL | produce"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[4], "4.00×")  # 100 MB/s against 25
        self.assertEqual(cells[8], "1.50× / 4.00×")  # s/GB over SSL against PLAINTEXT

    def test_only_secured_listeners_take_tls_and_only_sasl_ssl_a_login(self):
        certs = Path("/certs")
        self.assertEqual(client_flags("PLAINTEXT", certs), {})
        self.assertEqual(client_flags("SSL", certs), {"tls_ca": "/certs/ca.crt"})
        self.assertEqual(set(client_flags("SASL_SSL", certs)), {"tls_ca", "sasl_plain"})


if __name__ == "__main__":
    unittest.main()
