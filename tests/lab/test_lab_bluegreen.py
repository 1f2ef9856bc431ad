"""Updates under load (lab/update.py): a blue/green update keeps serving, an in-place one with one replica
per phase does not.

The slow test is the CPU rehearsal (lab/rehearse_update_cpu.py): the dev stack's real PD app
(`build_pd_openai_app`, Ray Serve LLM's OpenAI ingress) with lab/fake_engine.py engines, an open-loop
streaming load through lab/switch.py (the stand-in for the Kubernetes serve Service), a blue/green
update of the engine args, then an in-place one back. About 4 minutes on a shared 2-CPU machine (Ray's
start and three deploys of three replicas each); its numbers are stand-in numbers. The fast tests
check the proxy's switch and the step arithmetic with known answers."""

from __future__ import annotations

import asyncio

import pytest

from lab import update
from lab.switch import SwitchingProxy, rewrite_head
from measure.latency import RequestSample

# ── the switching proxy ──────────────────────────────────────────────────────────────────────


def test_the_proxy_puts_the_target_in_front_of_the_path_and_asks_for_one_request_per_connection():
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n"
    assert rewrite_head(head, "/tiny/pd/v2") == (b"POST /tiny/pd/v2/v1/completions HTTP/1.1\r\nHost: x\r\n"
                                                 b"Content-Length: 2\r\nConnection: close\r\n\r\n")


def test_a_stream_open_at_the_switch_stays_on_the_old_target_and_new_connections_reach_the_new_one():
    async def scenario() -> tuple[bytes, bytes, list[str], int]:
        seen: list[str] = []
        release = asyncio.Event()

        async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            path = head.split(" ")[1]
            seen.append(path)
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nfirst chunk of " + path.encode())
            await writer.drain()
            if path.startswith("/blue"):
                await release.wait()  # a long stream: still open when the switch comes
            writer.write(b" last chunk")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(upstream, "127.0.0.1", 0)
        proxy = SwitchingProxy(server.sockets[0].getsockname()[1], "/blue").start()
        try:
            async def request() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
                await writer.drain()
                return reader, writer

            old_reader, old_writer = await request()  # kept: a writer collected closes its connection
            while not seen:
                await asyncio.sleep(0.01)
            proxy.switch("/green")
            new_reader, new_writer = await request()
            new_answer = await asyncio.wait_for(new_reader.read(), 5)
            release.set()
            old_answer = await asyncio.wait_for(old_reader.read(), 5)
            for writer in (old_writer, new_writer):
                writer.close()
            return old_answer, new_answer, seen, proxy.opened("/blue")
        finally:
            proxy.stop()
            server.close()

    old_answer, new_answer, seen, to_blue = asyncio.run(scenario())
    assert seen == ["/blue/v1/models", "/green/v1/models"]
    assert old_answer.endswith(b"first chunk of /blue/v1/models last chunk")  # the old stream ran to its end
    assert new_answer.endswith(b"first chunk of /green/v1/models last chunk")
    assert to_blue == 1


# ── a step's arithmetic ──────────────────────────────────────────────────────────────────────


def streamed(start: float, first: float, count: int = 4, error: str | None = None) -> RequestSample:
    times = tuple(first + 0.05 * i for i in range(count))
    return RequestSample(start=start, end=times[-1] if times else start + 0.1, token_times=times, output_tokens=count,
                         error=error)


def test_a_step_that_stalled_without_failing_is_not_serving():
    # The change at 10; nothing answered from 10.5 until the new replica's first token at 30.
    samples = [streamed(8, 8.1), streamed(9.5, 10.4), streamed(11, 30), streamed(29, 30.2), streamed(31, 31.1)]
    marks = {"changed": 10.0, "new_version_served": 30.3, "update_done": 30.5, "end": 32.0}
    step = update.step_document("in-place", samples, 5.0, marks, 30.5, silence_limit_s=5.0)
    assert step["requests"]["failed"] == 0
    assert step["longest_silence_s"]["during"] == pytest.approx(30 - 10.55)
    assert step["verdict"] == {"new_version_served": True, "kept_serving": False, "silence_limit_s": 5.0}
    assert step["latency"]["during"]["requests"]["total"] == 3 and step["latency"]["after"]["requests"]["total"] == 1
    assert step["samples"][2]["start_s"] == 1.0  # raw samples in seconds from the change


def test_a_step_with_a_failed_request_is_not_serving_even_without_a_silence():
    samples = [streamed(9, 9.1), streamed(10.5, 10.6, count=0, error="InternalServerError: 500"), streamed(11, 11.1)]
    step = update.step_document("in-place", samples, 8.0, {"changed": 10.0, "update_done": 12.0}, 12.0, 5.0)
    assert step["requests"]["failed"] == 1 and step["requests"]["errors"] == {"InternalServerError: 500": 1}
    assert step["verdict"]["kept_serving"] is False and step["verdict"]["new_version_served"] is False


@pytest.mark.parametrize(("change", "paths"), [("evict", ["blue-green"]), ("engine-args", ["evict"]),
                                               ("engine-args", []), ("weights", ["in-place"])])
def test_steps_that_mean_nothing_are_refused(change, paths):
    with pytest.raises(ValueError):
        update.check_steps(change, paths)


# ── the rehearsal: real Ray Serve, fake engines ──────────────────────────────────────────────


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory) -> dict:
    from lab.rehearse_update_cpu import rehearse

    data = rehearse("engine-args", ["blue-green", "in-place"], tmp_path_factory.mktemp("update"),
                    source="dev [test tier, fake engines]")
    assert [s["path"] for s in data["steps"]] == ["blue-green", "in-place"], data.get("ready")
    return data


@pytest.mark.slow
def test_blue_green_fails_no_request_and_the_new_version_serves(rehearsal):
    step = rehearsal["steps"][0]
    assert step["requests"]["sent"] > 0 and step["requests"]["failed"] == 0, step["requests"]
    assert step["new_version_serves_after_s"] is not None and step["app_after"] == "tiny-pd-v2"
    assert step["target"] == "tiny {'enable_prefix_caching': False}"
    assert step["longest_silence_s"]["during"] <= update.UpdateTimes().silence_limit_s
    # Served by the new application only once it was RUNNING; nothing new reached the old one after the switch.
    marks = step["marks_after_change_s"]
    assert marks["switched"] >= marks["green_running"] and step["connections_to_old_after_switch"] == 0
    assert marks["old_deleted"] > marks["switched"]


@pytest.mark.slow
def test_in_place_with_one_replica_per_phase_stops_serving_until_the_new_replica_is_up(rehearsal):
    step = rehearsal["steps"][1]
    assert step["new_version_serves_after_s"] is not None and step["target"] == "tiny"
    stalled = step["longest_silence_s"]["during"] > update.UpdateTimes().silence_limit_s
    assert step["requests"]["failed"] > 0 or stalled, (step["requests"], step["longest_silence_s"])
    assert step["verdict"]["kept_serving"] is False
