"""Throwaway certificate authorities for the TLS tests, made with the `openssl` command."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVER_EXTENSIONS = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
CLIENT_EXTENSIONS = "extendedKeyUsage=clientAuth\n"


def openssl(*arguments: str | Path) -> str:
    done = subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True, text=True)
    return done.stdout


@dataclass(frozen=True)
class Ca:
    cert: Path
    key: Path
    directory: Path

    @classmethod
    def make(cls, directory: Path, name: str, subject: str) -> Ca:
        cert, key = directory / f"{name}.pem", directory / f"{name}.key"
        openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-days",
            "2",
            "-subj",
            subject,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        )
        return cls(cert, key, directory)

    def issue(self, name: str, subject: str, extensions: str = CLIENT_EXTENSIONS) -> tuple[Path, Path]:
        """(certificate, key) of a new key pair signed by this CA."""
        directory = self.directory
        key, request, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
        config = directory / f"{name}.ext"
        config.write_text(extensions)
        openssl(
            "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", subject
        )
        openssl(
            "x509",
            "-req",
            "-in",
            request,
            "-CA",
            self.cert,
            "-CAkey",
            self.key,
            "-CAcreateserial",
            "-out",
            cert,
            "-days",
            "2",
            "-sha256",
            "-extfile",
            config,
        )
        return cert, key


def rfc2253_names(cert: Path) -> tuple[str, str]:
    """(subject, issuer) as `openssl x509 -nameopt RFC2253` writes them."""
    lines = openssl("x509", "-in", cert, "-noout", "-subject", "-issuer", "-nameopt", "RFC2253").splitlines()
    subject, issuer = (line.split("=", 1)[1].strip() for line in lines)
    return subject, issuer
