"""A reader of Server-Sent Events (the WHATWG HTML standard's event stream format) from a
stream of bytes lines."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator


@dataclasses.dataclass(frozen=True)
class SseEvent:
    """One dispatched event."""

    event: str
    data: str
    id: str | None = None


class SseReader:
    """Reads events from `readline` (which returns b"" at the end of the stream). Comments
    (keep-alives) are read and skipped; `retry` is remembered as the stream's advice on how long
    to wait before reconnecting."""

    def __init__(self, readline: Callable[[], bytes]) -> None:
        self._readline = readline
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def __iter__(self) -> Iterator[SseEvent]:
        event = ""
        data: list[str] = []
        while True:
            raw = self._readline()
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if line == "":
                if data:
                    yield SseEvent(event or "message", "\n".join(data), self.last_event_id)
                event, data = "", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id" and "\0" not in value:
                self.last_event_id = value
            elif name == "retry" and value.isdigit():
                self.retry_ms = int(value)
