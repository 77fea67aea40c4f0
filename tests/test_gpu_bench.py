"""bench/gpu_bench.py's arithmetic over a loader's timeline (its runs need a GPU: make gpu-test)."""

from __future__ import annotations

from bench_scripts import load_bench

gpu_bench = load_bench("gpu_bench")


def span(stage, batch, start, end, epoch=0):
    return {"stage": stage, "epoch": epoch, "batch": batch, "thread": 0, "start": start, "end": end}


def test_the_start_up_says_when_each_first_batch_was_planned_read_decoded_and_delivered():
    spans = [
        span("wait", 0, 10.0, 11.5),  # the consumer's first ask: the clock's zero
        span("plan", 0, 10.0, 10.01), span("read", 0, 10.2, 10.6), span("read", 0, 10.6, 11.1),
        span("gpu decode", 0, 10.7, 10.9), span("gpu decode", 0, 11.1, 11.3), span("scatter", 0, 11.3, 11.4),
        span("plan", 1, 10.0, 10.02), span("read", 1, 10.3, 11.2), span("scatter", 1, 11.4, 11.6),
        span("wait", 1, 11.7, 11.7),
        span("plan", 0, 30.0, 30.01, epoch=1),  # the next epoch's batch 0: not the start
    ]
    first, second = gpu_bench.start_up(spans)
    assert first == {"batch": 0, "planned": 0.0, "read_from": 0.2, "read_to": 1.1, "gpu_decode_seconds": 0.4,
                     "done": 1.4, "delivered": 1.5}
    assert second == {"batch": 1, "planned": 0.0, "read_from": 0.3, "read_to": 1.2, "gpu_decode_seconds": 0.0,
                      "done": 1.6, "delivered": 1.7}
    # No wait recorded (the timeline was off): nothing to say.
    assert gpu_bench.start_up([s for s in spans if s["stage"] != "wait"]) == []
