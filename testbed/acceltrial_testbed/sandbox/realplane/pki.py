"""The throwaway certificates of one real control plane run.

A fresh CA signs the API server's serving certificate (for 127.0.0.1 and localhost only) and an
admin client certificate in ``system:masters``, which the kubeconfig, the controllers, the
scheduler and kwok all use. A separate RSA key signs service account tokens. Nothing outlives
the run's data directory.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=2)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class Certificates:
    """Paths of the PEM files of one run."""

    ca: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public: Path


def issue_certificates(directory: Path) -> Certificates:
    """Write a CA, a serving and an admin certificate and a service-account key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("acceltrial-sandbox-ca")
    ca_cert = _sign(
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(signing=True), critical=True),
        ca_key,
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving_cert = _sign(
        _builder(_name("kube-apiserver"), ca_name, serving_key)
        .add_extension(_key_usage(signing=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        ),
        ca_key,
    )
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin_cert = _sign(
        _builder(_name("acceltrial-admin", organization="system:masters"), ca_name, admin_key)
        .add_extension(_key_usage(signing=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False),
        ca_key,
    )
    service_account_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = Certificates(
        ca=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        service_account_key=directory / "sa.key",
        service_account_public=directory / "sa.pub",
    )
    _write_cert(files.ca, ca_cert)
    _write_cert(files.serving_cert, serving_cert)
    _write_key(files.serving_key, serving_key)
    _write_cert(files.admin_cert, admin_cert)
    _write_key(files.admin_key, admin_key)
    _write_key(files.service_account_key, service_account_key)
    files.service_account_public.write_bytes(
        service_account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return files


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(subject: x509.Name, issuer: x509.Name, key: PrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate clock skew
        .not_valid_after(now + VALIDITY)
    )


def _key_usage(*, signing: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not signing,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signing,
        crl_sign=signing,
        encipher_only=False,
        decipher_only=False,
    )


def _sign(builder: x509.CertificateBuilder, ca_key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    return builder.sign(ca_key, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: PrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
