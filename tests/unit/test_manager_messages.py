"""What the page's status says when a load fails: the cause, without what the host runs (other processes'
ids from torch's out-of-memory text) or where it keeps things (paths)."""

from __future__ import annotations

from tests.public_page_fixtures import PRESET, _wait

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "139.81 GiB of which 1.19 GiB is free. Process 12345 has 70.00 GiB memory in use. Process 678 has 60.00 "
       "GiB memory in use. Of the allocated memory 57.1 GiB is allocated by PyTorch. See /opt/app/log.txt")


def test_an_out_of_memory_load_failure_shows_no_process_ids_or_paths():
    from specplay.hosting.manager import PairManager
    from specplay.presets.catalog import get_preset

    def factory(preset, hardware=None, log=print):
        raise RuntimeError(OOM)

    manager = PairManager({PRESET: get_preset(PRESET)}, PRESET, pair_factory=factory, log=lambda *a: None)
    try:
        manager.load(PRESET)
        assert _wait(lambda: manager.status().state == "error")
        message = manager.status().message
        assert "CUDA out of memory" in message and "Process … has 70.00 GiB memory in use" in message, message
        for leak in ("12345", "678", "/opt/app"):
            assert leak not in message, message
    finally:
        manager.shutdown()


def test_process_ids_are_scrubbed_in_their_usual_forms():
    from specplay.hosting.settings import scrub

    assert scrub("worker pid=4242 died (PID: 99); process 7 exited with 137") == (
        "worker pid=… died (PID: …); process … exited with 137")
