"""The one-line description of the processor that the timing chapters print in their note."""

from speclib.book import wallclock


def test_summary_names_cores_and_cache(monkeypatch):
    monkeypatch.setattr(wallclock, "last_level_cache_bytes", lambda: 48 * 2**20)
    line = wallclock.processor_summary()
    assert "logical cores" in line and "largest cache 48 MiB" in line


def test_summary_states_the_load(monkeypatch):
    monkeypatch.setattr(wallclock, "_load_average", lambda: 9.24)
    assert wallclock.processor_summary().endswith("load average 9.2 while measuring")


def test_summary_without_cache_or_blas_still_reads(monkeypatch):
    monkeypatch.setattr(wallclock, "last_level_cache_bytes", lambda: None)
    monkeypatch.setattr(wallclock, "_blas_name", lambda: "")
    monkeypatch.setattr(wallclock, "_load_average", lambda: None)
    line = wallclock.processor_summary()
    assert "MiB" not in line and "numpy" not in line and line.endswith("logical cores")
