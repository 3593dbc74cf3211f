"""SCRAM (RFC 5802, RFC 7677): credentials as Kafka stores them, and both ends of the exchange.

A credential is what the server keeps instead of the password: a random salt, an iteration count,
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and ``ServerKey = HMAC(SaltedPassword,
"Server Key")`` with ``SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)``. Kafka keeps
it in the user's config map (``/config/users/<user>``) under the mechanism name, as
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.

The server checks the client's proof against StoredKey and proves itself with ServerKey, so a
stolen credential does not let anyone log in as the user (it does let them impersonate the server).
Sans-IO: messages in, messages out; the caller supplies the nonce source and the credential lookup.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

# Mechanism name -> hash name. Kafka's ScramMechanism, with its iteration bounds.
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ids for the mechanisms in Describe/AlterUserScramCredentials.
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
NONCE_BYTES = 24


class ScramError(ValueError):
    """The exchange failed: a malformed message, an unknown user, a wrong proof. The message is safe
    to show the client (it never says which of user or password was wrong)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        """Kafka's ZooKeeper form (``ScramCredentialUtils.credentialToString``)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @staticmethod
    def from_config(text: str) -> ScramCredential:
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"malformed SCRAM credential field {item!r}")
            fields[key.strip()] = value.strip()
        try:
            return ScramCredential(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=int(fields["iterations"]),
            )
        except KeyError as exc:
            raise ValueError(f"SCRAM credential lacks {exc.args[0]}") from None
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"malformed SCRAM credential: {exc}") from None


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """PBKDF2 with the mechanism's HMAC; what a client sends in AlterUserScramCredentials."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    h = _hash(mechanism)
    client_key = _hmac(h, salted, b"Client Key")
    stored_key = hashlib.new(h, client_key).digest()
    server_key = _hmac(h, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


# --- message syntax (RFC 5802 section 7) ---------------------------------------------------------------


def escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(text: str) -> str:
    # Only "=2C" and "=3D" may follow "=": anything else is malformed.
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "=":
            code = text[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError("Invalid SCRAM username encoding")
            i += 3
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        if len(item) < 2 or item[1] != "=" or not item[0].isalpha():
            raise ScramError(f"Invalid SCRAM message attribute {item[:32]!r}")
        out.append((item[0], item[2:]))
    return out


def _printable_nonce(nonce: str) -> bool:
    # RFC 5802: printable ASCII except ','.
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramError(f"Invalid SCRAM {what} encoding") from None


def _alphanumeric_nonce() -> str:
    # Letters and digits only, like Kafka's server nonces.
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return "".join(secrets.choice(alphabet) for _ in range(NONCE_BYTES + 8))


# --- server ------------------------------------------------------------------------------------------


class ScramServer:
    """One server-side exchange: ``step`` the client-first message, then the client-final one.

    ``lookup(username)`` returns the user's credential for this mechanism, or None. After the
    second step succeeds ``complete`` is True and ``username`` names the authenticated user.
    """

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._lookup = lookup
        self._nonce = nonce or _alphanumeric_nonce
        self._state = "first"
        self.complete = False
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._full_nonce = ""
        self._server_nonce = ""

    def step(self, token: bytes) -> bytes:
        if self._state == "first":
            return self._client_first(token)
        if self._state == "final":
            return self._client_final(token)
        raise ScramError("SCRAM exchange already finished")

    def _fail(self, message: str) -> ScramError:
        self._state = "failed"
        return ScramError(message)

    def _client_first(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("Invalid SCRAM client first message: not UTF-8") from None
        # gs2-header: "n,," or "n,a=<authzid>,". 'y' and 'p' (channel binding) are refused: Kafka's
        # SCRAM runs without channel binding, so a client asking for it must not be let through.
        flag, sep, rest = text.partition(",")
        if not sep or flag != "n":
            raise self._fail("Invalid SCRAM client first message: channel binding is not supported")
        authzid_part, sep, bare = rest.partition(",")
        if not sep:
            raise self._fail("Invalid SCRAM client first message")
        authzid = ""
        if authzid_part:
            if not authzid_part.startswith("a="):
                raise self._fail("Invalid SCRAM client first message")
            authzid = unescape_username(authzid_part[2:])
        items = bare.split(",")
        try:
            attrs = _attributes(",".join(items[:2]))
        except ScramError as exc:
            raise self._fail(str(exc)) from None
        extensions: dict[str, str] = {}
        for item in items[2:]:
            key, sep, value = item.partition("=")
            if not sep or not key.isalnum():
                raise self._fail("Invalid SCRAM client first message: malformed extension")
            extensions[key] = value
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise self._fail("Invalid SCRAM client first message: expected n=<user>,r=<nonce>")
        if attrs[0][1] == "":
            raise self._fail("Invalid SCRAM client first message: empty username")
        username = unescape_username(attrs[0][1])
        client_nonce = attrs[1][1]
        if not _printable_nonce(client_nonce):
            raise self._fail("Invalid SCRAM client first message: bad nonce")
        # Extensions follow the nonce; the one Kafka knows (tokenauth, delegation tokens) is not
        # supported here, so a client relying on it must not be taken for the user it names.
        if extensions.get("tokenauth", "").lower() == "true":
            raise self._fail("Authentication failed: delegation tokens are not supported")
        if authzid and authzid != username:
            raise self._fail("Authentication failed: Client requested an authorization id that is different from username")
        credential = self._lookup(username)
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        self._credential = credential
        self.username = username
        self._gs2_header = f"{flag},{authzid_part},"
        self._client_first_bare = bare
        self._server_nonce = self._nonce()
        self._full_nonce = client_nonce + self._server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._full_nonce},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("Invalid SCRAM client final message: not UTF-8") from None
        without_proof, sep, proof_attr = text.rpartition(",")
        if not sep or not proof_attr.startswith("p="):
            raise self._fail("Invalid SCRAM client final message: no proof")
        try:
            attrs = _attributes(without_proof)
        except ScramError as exc:
            raise self._fail(str(exc)) from None
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise self._fail("Invalid SCRAM client final message: expected c=,r=,p=")
        if _b64decode(attrs[0][1], "channel binding") != self._gs2_header.encode():
            raise self._fail("Invalid SCRAM client final message: channel binding does not match")
        # Kafka checks only that the nonce ends with the server's part (librdkafka 2.0 sends its own part
        # twice); the server part is fresh per exchange, so a replayed final message still fails.
        if not attrs[1][1].endswith(self._server_nonce):
            raise self._fail("Invalid SCRAM client final message: nonce does not match")
        proof = _b64decode(proof_attr[2:], "proof")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail("Authentication failed: Invalid client final message proof")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise self._fail("Authentication failed: Invalid user credentials")
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        self._state = "done"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


# --- client ------------------------------------------------------------------------------------------


class ScramClient:
    """The client side, for the admin client and broker-to-broker connections."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(NONCE_BYTES)
        self._client_first_bare = f"n={escape_username(username)},r={self._nonce}"
        self._server_signature = b""
        self.complete = False

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = dict(_attributes(text))
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) or salt is None:
            raise ScramError("Invalid SCRAM server first message")
        if not iterations.isdigit() or not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS * 64:
            raise ScramError(f"Invalid SCRAM iteration count {iterations!r}")
        salted = salted_password(self.mechanism, self._password, _b64decode(salt, "salt"), int(iterations))
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ScramError(f"SCRAM server error: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(_b64decode(text[2:], "signature"), self._server_signature):
            raise ScramError("Invalid SCRAM server signature")
        self.complete = True


# --- Describe/AlterUserScramCredentials, on the users' config maps --------------------------------------

# A user's SCRAM credentials: mechanism name -> Kafka's string form, as in the user's config map.
UserCredentials = dict[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: int
    message: str | None


# Kafka's error codes for these two APIs (Errors.java).
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93


def plan_alterations(current: UserCredentials, deletions: list[Deletion], upsertions: list[Upsertion]) \
        -> tuple[list[UserResult], UserCredentials]:
    """Kafka's checks, per user: a user with any bad alteration gets that error and keeps its
    credentials; the others get theirs applied. Returns one result per user named, in first-seen
    order, and every changed user's new credentials (an empty map: the user has none left)."""
    order: list[str] = []
    errors: dict[str, tuple[int, str]] = {}
    seen: dict[str, set[int]] = {}

    def note(user: str, mechanism: int) -> None:
        if user not in seen:
            order.append(user)
            seen[user] = set()
        if user in errors:
            return
        if mechanism in seen[user]:
            errors[user] = (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        seen[user].add(mechanism)

    for d in deletions:
        note(d.user, d.mechanism)
    for u in upsertions:
        note(u.user, u.mechanism)
    for d in deletions:
        if d.user in errors:
            continue
        if not d.user:
            errors[d.user] = (UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif d.mechanism not in MECHANISM_NAMES:
            errors[d.user] = (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif MECHANISM_NAMES[d.mechanism] not in current.get(d.user, {}):
            errors[d.user] = (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    for u in upsertions:
        if u.user in errors:
            continue
        if not u.user:
            errors[u.user] = (UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif u.mechanism not in MECHANISM_NAMES:
            errors[u.user] = (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif u.iterations < MIN_ITERATIONS:
            errors[u.user] = (UNACCEPTABLE_CREDENTIAL, f"Too few iterations: minimum is {MIN_ITERATIONS}")
        elif u.iterations > MAX_ITERATIONS:
            errors[u.user] = (UNACCEPTABLE_CREDENTIAL, f"Too many iterations: maximum is {MAX_ITERATIONS}")
        elif not u.salt or not u.salted_password:
            errors[u.user] = (UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    changed: UserCredentials = {}
    for d in deletions:
        if d.user not in errors:
            changed.setdefault(d.user, dict(current.get(d.user, {}))).pop(MECHANISM_NAMES[d.mechanism], None)
    for u in upsertions:
        if u.user not in errors:
            name = MECHANISM_NAMES[u.mechanism]
            cred = credential_from_salted(name, u.salted_password, u.salt, u.iterations)
            changed.setdefault(u.user, dict(current.get(u.user, {})))[name] = cred.to_config()
    results = [UserResult(user, *errors.get(user, (0, None))) for user in order]
    return results, changed
