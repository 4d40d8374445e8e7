#include "web/tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <QFile>
#include <QSslCertificate>
#include <QSslKey>
#include <QSslSocket>
#include <memory>

namespace meshwork::web {

namespace {

template <auto Free>
struct Freer {
  template <class T>
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Freer<X509_free>>;
using Bio = std::unique_ptr<BIO, Freer<BIO_free>>;
using Ext = std::unique_ptr<X509_EXTENSION, Freer<X509_EXTENSION_free>>;

QByteArray bio_bytes(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return QByteArray(data, static_cast<qsizetype>(n));
}

Error tls_error(const std::string& what) {
  return Error{"tls", "self-signed certificate", what + " failed (OpenSSL)"}.as(ErrorKind::internal);
}

QSslConfiguration server_config(const QSslCertificate& cert, const QSslKey& key) {
  QSslConfiguration c = QSslConfiguration::defaultConfiguration();
  c.setLocalCertificate(cert);
  c.setPrivateKey(key);
  c.setProtocol(QSsl::TlsV1_2OrLater);
  c.setPeerVerifyMode(QSslSocket::VerifyNone);
  return c;
}

Status check_backend() {
  if (!QSslSocket::supportsSsl())
    return Error{"tls", QSslSocket::sslLibraryVersionString().toStdString(),
                 "this Qt has no working TLS backend (OpenSSL 3): install it, or serve on loopback"}
        .as(ErrorKind::io);
  return {};
}

}  // namespace

QString sha256_fingerprint(const QSslCertificate& certificate) {
  const QByteArray hex = certificate.digest(QCryptographicHash::Sha256).toHex().toUpper();
  QString out;
  for (qsizetype i = 0; i < hex.size(); i += 2) {
    if (i) out += ':';
    out += QString::fromLatin1(hex.mid(i, 2));
  }
  return out;
}

Result<TlsIdentity> tls_from_files(const std::filesystem::path& cert_path, const std::filesystem::path& key_path) {
  if (auto ok = check_backend(); !ok) return ok.error();
  QFile cf(QString::fromStdString(cert_path.string()));
  if (!cf.open(QIODevice::ReadOnly)) return Error{"--tls-cert", cert_path.string(), "cannot be read"}.as(ErrorKind::io);
  const auto chain = QSslCertificate::fromData(cf.readAll(), QSsl::Pem);
  if (chain.isEmpty() || chain.front().isNull())
    return Error{"--tls-cert", cert_path.string(), "holds no PEM certificate"}.as(ErrorKind::io);
  QFile kf(QString::fromStdString(key_path.string()));
  if (!kf.open(QIODevice::ReadOnly)) return Error{"--tls-key", key_path.string(), "cannot be read"}.as(ErrorKind::io);
  const QByteArray pem = kf.readAll();
  QSslKey key;
  for (QSsl::KeyAlgorithm a : {QSsl::Rsa, QSsl::Ec, QSsl::Dsa}) {
    key = QSslKey(pem, a, QSsl::Pem, QSsl::PrivateKey);
    if (!key.isNull()) break;
  }
  if (key.isNull())
    return Error{"--tls-key", key_path.string(), "holds no unencrypted PEM private key (RSA or EC)"}.as(ErrorKind::io);
  TlsIdentity t;
  t.config = server_config(chain.front(), key);
  if (chain.size() > 1) t.config.setLocalCertificateChain(chain);
  t.fingerprint = sha256_fingerprint(chain.front());
  return t;
}

Result<TlsIdentity> tls_self_signed(const std::vector<std::string>& dns_names, const std::vector<QHostAddress>& addresses) {
  if (auto ok = check_backend(); !ok) return ok.error();
  Key key(EVP_EC_gen("P-256"));
  if (!key) return tls_error("EVP_EC_gen");
  Cert x(X509_new());
  if (!x) return tls_error("X509_new");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return tls_error("RAND_bytes");
  serial[0] &= 0x7f;  // a positive serial
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  const bool serial_ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  if (!serial_ok || X509_set_version(x.get(), 2) != 1) return tls_error("X509 serial");
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -60 * 60);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 30L * 24 * 60 * 60);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("meshwork serve"), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  if (X509_set_pubkey(x.get(), key.get()) != 1) return tls_error("X509_set_pubkey");
  std::string san;
  for (const auto& n : dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + n;
  for (const auto& a : addresses) san += (san.empty() ? "IP:" : ",IP:") + a.toString().toStdString();
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x.get(), x.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : std::vector<std::pair<int, std::string>>{
           {NID_subject_alt_name, san}, {NID_basic_constraints, "critical,CA:FALSE"},
           {NID_ext_key_usage, "serverAuth"}, {NID_key_usage, "critical,digitalSignature"}}) {
    if (value.empty()) continue;
    Ext ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
    if (!ext || X509_add_ext(x.get(), ext.get(), -1) != 1) return tls_error("X509 extension " + value);
  }
  if (X509_sign(x.get(), key.get(), EVP_sha256()) <= 0) return tls_error("X509_sign");
  Bio cert_pem(BIO_new(BIO_s_mem()));
  Bio key_pem(BIO_new(BIO_s_mem()));
  if (!cert_pem || !key_pem || PEM_write_bio_X509(cert_pem.get(), x.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_pem.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return tls_error("PEM_write");
  const QSslCertificate cert(bio_bytes(cert_pem.get()), QSsl::Pem);
  const QSslKey qkey(bio_bytes(key_pem.get()), QSsl::Ec, QSsl::Pem, QSsl::PrivateKey);
  if (cert.isNull() || qkey.isNull()) return tls_error("reading the PEM back");
  TlsIdentity t;
  t.config = server_config(cert, qkey);
  t.fingerprint = sha256_fingerprint(cert);
  t.self_signed = true;
  return t;
}

}  // namespace meshwork::web
