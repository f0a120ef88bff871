"""The bundled demo site (idcrawl.demo.site): a client that goes away mid-answer is not an error."""

from __future__ import annotations

import socket
import struct
import threading
import time

from idcrawl.demo.site import DemoModel, IdSite, Reply


class BigSlow(DemoModel):
    def reply(self, id_: int, host: str, nth: int) -> Reply:
        return Reply(200, b"x" * 2_000_000, (), 0.2)


def test_a_client_that_resets_its_connection_mid_answer_prints_no_traceback(capsys) -> None:
    site = IdSite(BigSlow())
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        client = socket.create_connection(("127.0.0.1", site.port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        client.sendall(b"GET /notice/5 HTTP/1.1\r\nHost: x\r\n\r\n")
        client.close()
        deadline = time.monotonic() + 10
        while not site.log and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)  # the answer is written (and fails) 0.2 s after the request is logged
    finally:
        site.shutdown()
        site.server_close()
    assert [entry.id for entry in site.log] == [5]
    assert "Traceback" not in capsys.readouterr().err
