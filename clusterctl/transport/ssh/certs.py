"""OpenSSH host certificates: reading one and checking it against a ``@cert-authority`` key.

Format: https://github.com/openssh/openssh-portable/blob/master/PROTOCOL.certkeys. The key
exchange already proved that the host holds the private half of the certified key; what is
checked here is the rest of what ssh checks: signed by a trusted CA, a *host* certificate,
issued for this host name, and valid now.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass

import paramiko

from clusterctl.transport.base import FailureKind, TransportError

HOST_CERT = 2
CERT_SUFFIX = "-cert-v01@openssh.com"


@dataclass(frozen=True)
class HostCertificate:
    #: The certified public key's wire blob (what a plain known_hosts line would hold).
    key_type: str
    key_blob: bytes
    kind: int
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    ca_blob: bytes
    signed_part: bytes
    signature: bytes

    @property
    def ca_type(self) -> str:
        return paramiko.Message(self.ca_blob).get_text()

    @property
    def ca_base64(self) -> str:
        return base64.b64encode(self.ca_blob).decode()

    @property
    def key_base64(self) -> str:
        return base64.b64encode(self.key_blob).decode()

    def signed_by_ca(self) -> bool:
        try:
            ca = paramiko.PKey.from_type_string(self.ca_type, self.ca_blob)
            return bool(ca.verify_ssh_sig(self.signed_part, paramiko.Message(self.signature)))
        except Exception:  # a malformed or unsupported CA key is simply not a valid signature
            return False

    def problem_for(self, name: str) -> str | None:
        """Why this certificate does not vouch for host ``name`` now, or None when it does."""
        if self.kind != HOST_CERT:
            return "it is a user certificate, not a host certificate"
        if self.principals and name not in self.principals:
            return f"it was issued for {', '.join(self.principals)}, not {name}"
        moment = int(time.time())
        if moment < self.valid_after:
            return "it is not valid yet"
        if moment >= self.valid_before:
            return "it has expired"
        if not self.signed_by_ca():
            return "its CA signature does not verify"
        return None


def host_certificate(key: paramiko.PKey) -> HostCertificate | None:
    """The certificate a server presented as its host key, or None for a plain key."""
    blob = getattr(key, "public_blob", None)
    if blob is None or not str(blob.key_type).endswith(CERT_SUFFIX):
        return None
    return parse_certificate(bytes(blob.key_blob))


def parse_certificate(blob: bytes) -> HostCertificate:
    msg = paramiko.Message(blob)
    cert_type = msg.get_text()
    msg.get_binary()  # nonce
    plain_type = cert_type[: -len(CERT_SUFFIX)]
    key_msg = paramiko.Message()
    key_msg.add_string(plain_type)
    if plain_type == "ssh-ed25519":
        key_msg.add_string(msg.get_binary())
    elif plain_type.startswith("ecdsa-sha2-"):
        key_msg.add_string(msg.get_text())
        key_msg.add_string(msg.get_binary())
    elif plain_type in ("ssh-rsa", "rsa-sha2-256", "rsa-sha2-512"):
        e, n = msg.get_mpint(), msg.get_mpint()
        key_msg.add_mpint(e)
        key_msg.add_mpint(n)
        plain_type = "ssh-rsa"
    else:
        raise TransportError(FailureKind.HOST_KEY_REFUSED,
                             f"it presented a host certificate of type {cert_type}, which clusterctl cannot check")
    msg.get_int64()  # serial
    kind = msg.get_int()
    key_id = msg.get_text()
    principals_msg = paramiko.Message(msg.get_binary())
    principals: list[str] = []
    while principals_msg.get_remainder():
        principals.append(principals_msg.get_text())
    valid_after = msg.get_int64()
    valid_before = msg.get_int64()
    msg.get_binary()  # critical options
    msg.get_binary()  # extensions
    msg.get_binary()  # reserved
    ca_blob = msg.get_binary()
    signed_len = msg.packet.tell()
    signature = msg.get_binary()
    return HostCertificate(
        key_type=plain_type,
        key_blob=key_msg.asbytes(),
        kind=kind,
        key_id=key_id,
        principals=tuple(principals),
        valid_after=valid_after,
        valid_before=valid_before,
        ca_blob=ca_blob,
        signed_part=blob[:signed_len],
        signature=signature,
    )
