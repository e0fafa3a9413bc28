"""What anyone may fetch to check the pit's rounds: each round's receipt and the QR code that
links a player's phone to it (/receipt, /qr), and each shoe's log as C2SP tlog-tiles (/log).
Each reads the audit store on a thread with a connection of its own, and answers within
READ_WAIT seconds whatever the database does (503: it does not answer)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import closing
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sabot.audit.store import AuditStore, open_store
from sabot.errors import SabotError
from sabot.pit.scoreboard import receipt_path
from sabot.pit.tables import Pit

READ_WAIT = 5.0  # seconds a request's read of the store may take


async def in_time(read: Callable[[], Any], wait: float = READ_WAIT) -> Any:
    """read() on a thread; TimeoutError when the database keeps it longer than `wait`."""
    return await asyncio.wait_for(run_in_threadpool(read), wait)


def no_answer() -> Response:
    return Response("the audit database does not answer: try again shortly\n", status_code=503,
                    media_type="text/plain; charset=utf-8", headers={"Retry-After": "5"})


def qr_svg(link: str) -> bytes:
    """The QR code of `link` as an SVG document of its own (its namespace declared: an <img>
    shows nothing without it)."""
    import io

    import segno

    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="svg", xmldecl=False, scale=6, border=2)
    return out.getvalue()


def receipt_routes(pit: Pit) -> list[Route]:
    """/receipt/TABLE/SHOE/ROUND (a round's receipt, made from the store once its checkpoint is
    cosigned) and /qr/TABLE/SHOE/ROUND (the QR code of the checker page's link to it)."""

    def receipt_of(request: Request) -> tuple[int, str]:
        """(status, the receipt or one line why not) of the round a /receipt or /qr path
        names."""
        from sabot.audit.receipts import make_receipt

        p = request.path_params
        t = pit.table(p["table"])
        if t is None:
            return 404, f"no table {p['table']}\n"
        if not (0 < p["shoe"] < 1 << 16 and 0 < p["round"] < 1 << 16):
            return 404, "no such round: shoes and rounds are numbered 1 to 65535\n"
        with closing(open_store(pit.db, writer=False)) as store:
            try:
                return 200, make_receipt(store, t.config, p["shoe"], p["round"])
            except SabotError as e:
                return 404, f"{e}\n"

    async def receipt_route(request: Request) -> Response:
        try:
            status, text = await in_time(lambda: receipt_of(request))
        except TimeoutError:
            return no_answer()
        return Response(text, status_code=status, media_type="text/plain; charset=utf-8",
                        headers={"Cache-Control": "no-cache",
                                 "Access-Control-Allow-Origin": "*"})

    async def qr_route(request: Request) -> Response:
        """The QR code (SVG) of the checker page's link to a round's receipt on this server,
        built from serve --public-url only: never from the request's Host header, which any
        client sets (a QR code cached with another's address would send players elsewhere)."""
        p = request.path_params
        if pit.public_url is None:
            return Response("no QR codes here: serve makes them only with --public-url, the "
                            "address players' phones reach it by\n", status_code=404,
                            media_type="text/plain; charset=utf-8", headers={"Vary": "Host"})
        if pit.table(p["table"]) is None or not (0 < p["shoe"] < 1 << 16
                                                  and 0 < p["round"] < 1 << 16):
            return Response(f"no round {p['round']} of shoe {p['shoe']} at table "
                            f"{p['table']}\n", status_code=404,
                            media_type="text/plain; charset=utf-8")
        here = pit.public_url
        path = receipt_path(p["table"], p["shoe"], p["round"])
        # another origin's checker (the regulator's) fetches the receipt from here by its
        # whole address (/receipt answers any origin: a receipt is public and proves itself)
        link = (f"{pit.checker}#{here}{path}" if pit.checker else f"{here}/verify#{path}")
        return Response(qr_svg(link), media_type="image/svg+xml",
                        headers={"Cache-Control": "max-age=3600", "Vary": "Host"})

    return [Route("/receipt/{table}/{shoe:int}/{round:int}", receipt_route),
            Route("/qr/{table}/{shoe:int}/{round:int}", qr_route)]


def log_routes(pit: Pit) -> list[Route]:
    """Each served shoe's log as C2SP tlog-tiles, from the audit store: /log/<8 hex digits of
    the shoe id>/checkpoint (the newest checkpoint the shoe signed, with the witnesses'
    cosignatures stored for it; the most cosigned size first) and /log/<id>/tile/... (hash
    tiles and entry bundles, up to that checkpoint's size)."""
    from sabot import tlog
    from sabot.audit.receipts import published_note
    from sabot.audit.records import stored_log

    def text(body: str | bytes, status: int = 200, kind: str = "text/plain; charset=utf-8"
             ) -> Response:
        return Response(body, status_code=status, media_type=kind,
                        headers={"Cache-Control": "no-cache" if kind.startswith("text")
                                 else "max-age=31536000, immutable"})

    def head(store: AuditStore, shoe: str) -> tuple[Any, dict[str, Any] | None]:
        """(the shoe's table, its newest checkpoint with the most cosignatures) or Nones."""
        digits = shoe.lower().removeprefix("0x")
        if not 1 <= len(digits) <= 8 or any(c not in "0123456789abcdef" for c in digits):
            return None, None
        t = next((v for v in pit.tables() if v.shoe_id == int(digits, 16)), None)
        if t is None:
            return None, None
        cps = store.checkpoints(t.shoe_id)
        best = max(cps, key=lambda c: (len(c["cosignatures"]) > 0, c["size"]), default=None)
        return t, best

    def reading(answer: Callable[[AuditStore], Response]) -> Response:
        with closing(open_store(pit.db, writer=False)) as store:  # one reader a request
            return answer(store)

    def checkpoint_of(store: AuditStore, shoe: str) -> Response:
        t, cp = head(store, shoe)
        if t is None:
            return text(f"no shoe {shoe} is served here\n", 404)
        if cp is None:
            return text(f"shoe {shoe} has signed no checkpoint of its log yet\n", 404)
        try:
            return text(published_note(t.config, cp))
        except SabotError as e:
            return text(f"{e}\n", 404)

    def tile_of(store: AuditStore, shoe: str, path: str) -> Response:
        where = tlog.parse_tile_path("tile/" + path)
        t, cp = head(store, shoe)
        if t is None or where is None or cp is None:
            return text("no such tile\n", 404)
        level, index, width = where
        log, leaves = stored_log(store, t.shoe_id)
        size = min(cp["size"], len(log.hashes))
        data = (tlog.entry_bundle(leaves, size, index, width) if level is None
                else tlog.tile(log.hashes, size, level, index, width))
        if data is None:
            return text("no such tile in the log's published size\n", 404)
        return text(data, kind="application/octet-stream")

    async def checkpoint_route(request: Request) -> Response:
        shoe = request.path_params["shoe"]
        try:
            done: Response = await in_time(lambda: reading(
                lambda store: checkpoint_of(store, shoe)))
        except TimeoutError:
            return no_answer()
        return done

    async def tile_route(request: Request) -> Response:
        p = request.path_params
        try:
            done: Response = await in_time(lambda: reading(
                lambda store: tile_of(store, p["shoe"], p["path"])))
        except TimeoutError:
            return no_answer()
        return done

    return [Route("/log/{shoe}/checkpoint", checkpoint_route),
            Route("/log/{shoe}/tile/{path:path}", tile_route)]


