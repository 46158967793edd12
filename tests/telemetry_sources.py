"""Telemetry sources the tests register (module-level, so that the sampler process can import their factories)."""

from accelbench.telemetry.sources import Source


class BrokenSensor(Source):
    """Starts and ends a window, but every ``read`` raises, as a sensor that stopped answering."""

    name = "broken"

    def read(self):
        raise RuntimeError("the sensor stopped answering")


def broken_sources(devices, period_s, pids):
    return [BrokenSensor()]
