// TLS for a listener other than loopback: the user's certificate and key (--tls-cert, --tls-key),
// or a self-signed certificate made at start with OpenSSL (Qt cannot make one), which lives only
// in this process. Browsers warn about a self-signed certificate; `meshwork serve` prints its
// SHA-256 fingerprint so the user can check the one the browser shows (as Jupyter's does).
#pragma once

#include <QHostAddress>
#include <QSslConfiguration>
#include <QString>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

namespace meshwork::web {

struct TlsIdentity {
  QSslConfiguration config;  // server side: certificate, key, TLS 1.2 or newer, no peer check
  QString fingerprint;       // SHA-256 of the certificate (DER), "AB:CD:..." as openssl prints it
  bool self_signed = false;
};

// PEM files; errors name the flag, the file and what is wrong with it.
Result<TlsIdentity> tls_from_files(const std::filesystem::path& cert, const std::filesystem::path& key);
// A fresh P-256 key and a certificate valid for 30 days naming `dns_names` and `addresses`.
Result<TlsIdentity> tls_self_signed(const std::vector<std::string>& dns_names, const std::vector<QHostAddress>& addresses);

QString sha256_fingerprint(const QSslCertificate& certificate);

}  // namespace meshwork::web
