"""The CSRF guard of the console's POSTs.

A per-process secret, put in every page the console serves and sent back by the page's script in
the ``X-CSRF-Token`` header. Another site cannot read the page (same-origin policy, and the
console refuses foreign Host headers, so DNS rebinding cannot make it same-origin), so it cannot
learn the token, and a cross-site form or fetch without it is refused. A restart changes the
secret: an old page must be reloaded.
"""

from __future__ import annotations

import hmac
import secrets

HEADER = "x-csrf-token"


class CsrfGuard:
    def __init__(self, token: str | None = None) -> None:
        self.token = token if token is not None else secrets.token_urlsafe(32)

    def check(self, presented: str | None) -> bool:
        # Constant-time: the comparison must not tell an attacker how much of a guess was right.
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())
