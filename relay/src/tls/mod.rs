//! The relay's TLS: the certificates of the page's HTTPS and of WebTransport ([`cert`]: the
//! rotating self-signed ones, `--tls-cert` files, the page's own kept one), and ACME's ([`acme`]:
//! obtained and renewed from a CA, the challenge answered on the relay's own TCP port).

pub mod acme;
pub mod cert;
