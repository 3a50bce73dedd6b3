"""What the image pipeline hands a provider: an image's encoded bytes, its type and size, and the
base64 forms request bodies need (kept for small images only, see TEXT_KEPT_UP_TO)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

TEXT_KEPT_UP_TO = 1 << 20  # bytes of image whose base64 text is kept with it (bigger: made per request)


@dataclass(frozen=True)
class PreparedImage:
    """Encoded bytes ready to send; the base64 text of a small image is computed once and reused.

    A big one's text (a 12 Mpx photo sent as it is: 4.4 MB) is made for each request instead: kept,
    it more than doubled what every prepared image held while its request waited for a slot, and
    encoding it again costs a few milliseconds beside sending it."""

    data: bytes
    mime: str
    width: int
    height: int
    _b64: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _uri: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def _keeps_text(self) -> bool:
        return len(self.data) <= TEXT_KEPT_UP_TO

    def b64(self) -> str:
        if self._b64:
            return self._b64[0]
        text = base64.b64encode(self.data).decode("ascii")
        if self._keeps_text:
            self._b64.append(text)
        return text

    def data_uri(self) -> str:
        if self._uri:
            return self._uri[0]
        uri = f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"
        if self._keeps_text:  # built directly: caching the bare base64 too would double the memory
            self._uri.append(uri)
        return uri

    def data_uri_bytes(self) -> bytes:
        """The data URI as ASCII bytes (a request body's), without a str copy of a big image's text."""
        if self._keeps_text:
            return self.data_uri().encode("ascii")
        return b"data:" + self.mime.encode("ascii") + b";base64," + base64.b64encode(self.data)

    @property
    def nbytes(self) -> int:
        """Memo weight: the bytes plus, for a small image, one base64 text form (providers ask for one of the two)."""
        return len(self.data) + (4 * ((len(self.data) + 2) // 3) if self._keeps_text else 0) + 64
