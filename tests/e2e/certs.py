"""Certificates for the TLS tests, made with the openssl CLI at run time: a test CA and leaf
certificates signed by it, each key also in PKCS#8 (as Kafka's PEM key store wants it)."""

import socket
import subprocess
from pathlib import Path


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path):
    """`ca.pem` and `ca.key` in `d`."""
    openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj",
            "/CN=Weir Test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_leaf(d: Path, name, subj, eku, san):
    """`<name>.pem` signed by the CA in `d`, its key as `<name>.key` and `<name>.p8`."""
    ext = d / f"{name}.ext"
    ext.write_text(f"extendedKeyUsage={eku}\n" + (f"subjectAltName={san}\n" if san else ""))
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "30", "-out", f"{name}.pem", "-extfile", ext.name,
            cwd=d)
    openssl("pkcs8", "-topk8", "-nocrypt", "-in", f"{name}.key", "-out", f"{name}.p8", cwd=d)


def key_store(d: Path, name):
    """`<name>-store.pem`: the PKCS#8 key followed by the certificate, one PEM key store."""
    (d / f"{name}-store.pem").write_text((d / f"{name}.p8").read_text()
                                         + (d / f"{name}.pem").read_text())
