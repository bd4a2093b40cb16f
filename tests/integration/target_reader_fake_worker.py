"""A test-only reader worker that misbehaves on purpose; run as ``python -m`` by the supervisor in tests.

The behaviour is chosen by the request's load-id selector value, so no switch exists in the product: the supervisor only lets tests name a different worker module. Every behaviour reads the real
request frame first (with the real protocol code), as a worker would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from airflow_provider_dpone.adapters.target_reader.protocol import REQUEST_FRAME_MAX_BYTES, WorkerRequestFrame
from airflow_provider_dpone.adapters.target_reader.worker import (
    close_quietly,
    open_readonly_client,
    read_frame,
    write_frame,
)
from airflow_provider_dpone.contracts.capsule import canonical_bytes
from airflow_provider_dpone.contracts.target_observation import (
    MetricValue,
    ObservationMetric,
    ObservationStatus,
    ReaderResponseFrame,
    TargetObservation,
    TargetReadRequest,
    WorkerErrorCode,
)


def _honest(nonce: str, request: TargetReadRequest) -> bytes:
    """A well-formed answer to ``request`` with every metric 7."""
    observation = TargetObservation(
        request_sha256=request.sha256(),
        status=ObservationStatus.COMPLETE,
        metrics=tuple(MetricValue(metric=m, column=c, value=7) for m, c in request.expected_keys()),
    )
    return canonical_bytes(ReaderResponseFrame(nonce=nonce, observation=observation)) + b"\n"


def main() -> int:
    frame = WorkerRequestFrame.decode(read_frame(0, REQUEST_FRAME_MAX_BYTES))
    assert frame.request is not None and frame.endpoint is not None
    request = frame.request
    assert request.selector.load_id is not None
    behaviour = request.selector.load_id.value
    out = 1
    if behaviour == "honest":
        write_frame(out, _honest(frame.nonce, request))
    elif behaviour == "late":
        time.sleep(frame.budget_ms / 1000 + 2)
        write_frame(out, _honest(frame.nonce, request))
    elif behaviour == "oversized":
        write_frame(out, b"{" + b" " * (2 * 1024 * 1024))
        time.sleep(30)
    elif behaviour == "malformed":
        write_frame(out, b'{"nonce": "not canonical json"\n')
    elif behaviour == "duplicate_key":
        honest = _honest(frame.nonce, request)
        write_frame(out, b'{"error":"query_failed",' + honest[1:])
    elif behaviour == "doubled":
        honest = _honest(frame.nonce, request)
        write_frame(out, honest + honest)
    elif behaviour == "trailing_byte":
        write_frame(out, _honest(frame.nonce, request) + b" ")
    elif behaviour == "wrong_nonce":
        write_frame(out, _honest("0" * 64, request))
    elif behaviour == "plan_mismatch":
        wrong = TargetObservation(
            request_sha256=request.sha256(),
            status=ObservationStatus.COMPLETE,
            metrics=(MetricValue(metric=ObservationMetric.ROW_COUNT, value=1),),
        )
        write_frame(out, canonical_bytes(ReaderResponseFrame(nonce=frame.nonce, observation=wrong)) + b"\n")
    elif behaviour == "exit_nonzero":
        write_frame(out, _honest(frame.nonce, request))
        return 3
    elif behaviour == "silent_exit":
        return 0
    elif behaviour == "frame_then_hang":
        write_frame(out, _honest(frame.nonce, request))
        time.sleep(60)
    elif behaviour == "hang_with_grandchild":
        # A grandchild in the same process group that would outlive a plain kill of the worker.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
    elif behaviour == "setsid_escapee":
        # A descendant in a new session (so outside the worker's group), then an honest answer and exit 0.
        escapee = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)", "dpone-setsid-escapee"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        while os.getsid(escapee.pid) != escapee.pid:
            time.sleep(0.01)
        write_frame(out, _honest(frame.nonce, request))
    elif behaviour == "write_attempt":
        # Open the worker's own verified read-only session on the real endpoint, then try to write.
        endpoint = frame.endpoint.descriptor()
        client = open_readonly_client(endpoint, frame.budget_ms / 1000)
        try:
            try:
                client.command(f"INSERT INTO {request.target_table} (id) VALUES (999)")
                code = WorkerErrorCode.INTERNAL  # the write went through: the test must fail
            except Exception:
                code = WorkerErrorCode.QUERY_FAILED  # refused, as readonly=1 requires
        finally:
            close_quietly(client)
        write_frame(out, canonical_bytes(ReaderResponseFrame(nonce=frame.nonce, error=code)) + b"\n")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
