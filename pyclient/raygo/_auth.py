"""The cluster token and TLS, found as the Go side finds them (internal/auth,
internal/rpcutil). The token: ``RAYGO_AUTH_TOKEN``, else the file at
``RAYGO_AUTH_TOKEN_PATH``, else ``~/.raygo/auth_token``; every call to the GCS carries it as
``authorization: Bearer <token>`` metadata, as Ray 2.60's calls do. TLS: ``RAYGO_USE_TLS``
and the certificate, key and CA files.
"""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path
from typing import Optional, Tuple

import grpc

ENV_TOKEN = "RAYGO_AUTH_TOKEN"
ENV_TOKEN_PATH = "RAYGO_AUTH_TOKEN_PATH"
METADATA_KEY = "authorization"


def load_token() -> Optional[str]:
    """The token this process has, or None. A token file that others can read, that is
    empty, or that ``RAYGO_AUTH_TOKEN_PATH`` names but does not exist is a ValueError naming it."""
    token = os.environ.get(ENV_TOKEN, "").strip()
    if token or "RAYGO_AUTH_TOKEN_SHA256" in os.environ:
        # A raylet's worker under auth has only the token its raylet gave it (none for
        # some): it never falls back to a token file, which may hold the cluster token.
        return token or None
    named = os.environ.get(ENV_TOKEN_PATH, "")
    path = Path(named) if named else Path.home() / ".raygo" / "auth_token"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if named:
            raise ValueError(f"{ENV_TOKEN_PATH}={named}: no such file") from None
        return None
    if stat.S_IMODE(mode) & 0o077:
        raise ValueError(f"token file {path}: mode {stat.S_IMODE(mode):o} lets others read it; chmod 600 {path}")
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"token file {path}: empty")
    return token


TLS_VARIABLES = ("RAYGO_TLS_SERVER_CERT", "RAYGO_TLS_SERVER_KEY", "RAYGO_TLS_CA_CERT")


def _tls_files() -> Optional[Tuple[str, str, str]]:
    """The paths of ``RAYGO_TLS_SERVER_CERT``, ``RAYGO_TLS_SERVER_KEY`` and
    ``RAYGO_TLS_CA_CERT`` with ``RAYGO_USE_TLS=1``; None without. A missing variable is a
    ValueError naming it."""
    use = os.environ.get("RAYGO_USE_TLS", "").strip().lower()
    if use in ("", "0", "false"):
        return None
    if use not in ("1", "true"):
        raise ValueError(f"RAYGO_USE_TLS={use!r}: must be 1 or 0")
    paths = []
    for name in TLS_VARIABLES:
        path = os.environ.get(name, "")
        if not path:
            raise ValueError(f"RAYGO_USE_TLS=1 needs {', '.join(TLS_VARIABLES)}: {name} is not set")
        paths.append(path)
    cert, key, ca = paths
    return cert, key, ca


def tls_credentials() -> Optional[grpc.ChannelCredentials]:
    """With ``RAYGO_USE_TLS=1`` (Ray's ``RAY_USE_TLS``), the mutual-TLS credentials of
    ``RAYGO_TLS_SERVER_CERT``, ``RAYGO_TLS_SERVER_KEY`` and ``RAYGO_TLS_CA_CERT``; None
    without. A missing variable or file is a ValueError naming it."""
    paths = _tls_files()
    if paths is None:
        return None
    files = []
    for name, path in zip(TLS_VARIABLES, paths):
        try:
            files.append(Path(path).read_bytes())
        except OSError as err:
            raise ValueError(f"{name}={path}: {err}") from None
    cert, key, ca = files
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def tls_ssl_context() -> Optional[ssl.SSLContext]:
    """The client side of the dashboard port's HTTPS with ``RAYGO_USE_TLS=1``: the CA of
    ``RAYGO_TLS_CA_CERT`` and the certificate and key as the client's; None without."""
    paths = _tls_files()
    if paths is None:
        return None
    cert, key, ca = paths
    try:
        context = ssl.create_default_context(cafile=ca)
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(f"RAYGO_USE_TLS=1: {err}") from None
    return context
