//! The WebTransport certificate: a short-lived self-signed one that rotates, or one the user gave.
//!
//! Chromium accepts a self-signed certificate through `serverCertificateHashes` only if it is
//! ECDSA P-256 and valid for at most 14 days, so the relay makes one valid for 13 days and
//! switches to a fresh one every `rotate` (11 days by default). The next certificate is made and
//! its hash published `ahead` of the switch, so a page that fetched the hash list shortly before
//! the switch already knows the new one. Live connections are unaffected by a switch: QUIC
//! checks the certificate only during the handshake.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use wtransport::Identity;

/// Validity of each self-signed certificate (Chromium's limit is 14 days).
pub const VALIDITY: Duration = Duration::from_secs(13 * 24 * 3600);
/// Back-dating of `notBefore`, for clients whose clock is a little behind.
pub const BACKDATE: Duration = Duration::from_secs(3600);

/// One certificate with its hash.
#[derive(Debug)]
pub struct CertInfo {
    identity: Identity,
    /// SHA-256 of the DER certificate.
    pub hash: [u8; 32],
    /// When the relay made it (or loaded it).
    pub made: Instant,
}

impl CertInfo {
    fn new(identity: Identity, made: Instant) -> Self {
        let hash = *identity.certificate_chain().as_slice()[0].hash().as_ref();
        CertInfo { identity, hash, made }
    }

    pub fn identity(&self) -> Identity {
        self.identity.clone_identity()
    }

    pub fn hash_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.hash)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("cannot load --tls-cert/--tls-key: {0}")]
    Load(String),
    #[error(
        "certificate rotation every {rotate:?} plus {ahead:?} ahead exceeds the {VALIDITY:?} validity"
    )]
    Schedule { rotate: Duration, ahead: Duration },
}

#[derive(Debug)]
struct Certs {
    current: Arc<CertInfo>,
    next: Option<Arc<CertInfo>>,
}

/// Owns the current (and upcoming) certificate.
#[derive(Debug)]
pub struct CertManager {
    certs: RwLock<Certs>,
    /// `None` for a user-supplied certificate, which never rotates.
    schedule: Option<(Duration, Duration)>,
    sans: Vec<String>,
}

/// Makes a self-signed ECDSA P-256 identity valid from an hour ago for [`VALIDITY`].
pub fn self_signed(sans: &[String]) -> Result<Identity, CertError> {
    let not_before = time::OffsetDateTime::now_utc() - BACKDATE;
    let not_after = not_before + VALIDITY;
    Identity::self_signed_builder()
        .subject_alt_names(sans)
        .validity_period(not_before, not_after)
        .build()
        .map_err(|e| CertError::SelfSigned(e.to_string()))
}

impl CertManager {
    /// Self-signed certificates rotating every `rotate`, the next one published `ahead` of time.
    pub fn self_signed(
        sans: Vec<String>,
        rotate: Duration,
        ahead: Duration,
    ) -> Result<Self, CertError> {
        if rotate + ahead + BACKDATE > VALIDITY || ahead >= rotate {
            return Err(CertError::Schedule { rotate, ahead });
        }
        let current = Arc::new(CertInfo::new(self_signed(&sans)?, Instant::now()));
        Ok(CertManager {
            certs: RwLock::new(Certs { current, next: None }),
            schedule: Some((rotate, ahead)),
            sans,
        })
    }

    /// A user-supplied certificate chain and key (PEM files).
    pub async fn load(cert: &std::path::Path, key: &std::path::Path) -> Result<Self, CertError> {
        let identity =
            Identity::load_pemfiles(cert, key).await.map_err(|e| CertError::Load(e.to_string()))?;
        Ok(CertManager {
            certs: RwLock::new(Certs {
                current: Arc::new(CertInfo::new(identity, Instant::now())),
                next: None,
            }),
            schedule: None,
            sans: Vec::new(),
        })
    }

    pub fn current(&self) -> Arc<CertInfo> {
        Arc::clone(&self.read().current)
    }

    /// Hashes the page should pass to `serverCertificateHashes`: current first, then the next one.
    pub fn hashes(&self) -> Vec<String> {
        let c = self.read();
        std::iter::once(&c.current).chain(c.next.as_ref()).map(|i| i.hash_base64()).collect()
    }

    pub fn is_self_signed(&self) -> bool {
        self.schedule.is_some()
    }

    /// Advances the schedule. Returns the new identity when the current one was switched, which
    /// the caller must hand to the endpoint.
    pub fn tick(&self, now: Instant) -> Result<Option<Identity>, CertError> {
        let Some((rotate, ahead)) = self.schedule else {
            return Ok(None);
        };
        let age = now.saturating_duration_since(self.read().current.made);
        if age + ahead >= rotate && self.read().next.is_none() {
            let next = Arc::new(CertInfo::new(self_signed(&self.sans)?, now));
            tracing::info!(hash = %next.hash_base64(), "made the next WebTransport certificate");
            self.write().next = Some(next);
        }
        if age >= rotate {
            let mut c = self.write();
            if let Some(next) = c.next.take() {
                tracing::info!(hash = %next.hash_base64(), "switching to the next WebTransport certificate");
                c.current = next;
                return Ok(Some(c.current.identity()));
            }
        }
        Ok(None)
    }

    /// How long until [`CertManager::tick`] has something to do (a bound for the caller's timer).
    pub fn next_tick_in(&self, now: Instant) -> Option<Duration> {
        let (rotate, ahead) = self.schedule?;
        let c = self.read();
        let age = now.saturating_duration_since(c.current.made);
        let due = if c.next.is_none() { rotate - ahead } else { rotate };
        Some(due.saturating_sub(age))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Certs> {
        self.certs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Certs> {
        self.certs.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_publishes_ahead_then_switches() {
        let m = CertManager::self_signed(
            vec!["localhost".into()],
            Duration::from_secs(100),
            Duration::from_secs(10),
        )
        .unwrap();
        let t0 = m.current().made;
        let first = m.hashes();
        assert_eq!(first.len(), 1);
        assert!(m.tick(t0 + Duration::from_secs(50)).unwrap().is_none());
        assert_eq!(m.hashes(), first);
        assert!(m.tick(t0 + Duration::from_secs(91)).unwrap().is_none());
        let both = m.hashes();
        assert_eq!(both.len(), 2);
        assert_eq!(both[0], first[0]);
        let id = m.tick(t0 + Duration::from_secs(100)).unwrap();
        assert!(id.is_some());
        assert_eq!(m.hashes(), vec![both[1].clone()]);
    }

    #[test]
    fn schedule_must_fit_the_validity() {
        assert!(
            CertManager::self_signed(
                vec!["localhost".into()],
                Duration::from_secs(13 * 24 * 3600),
                Duration::from_secs(60)
            )
            .is_err()
        );
    }

    #[test]
    fn certificate_validity_is_at_most_14_days() {
        let id = self_signed(&["localhost".to_string()]).unwrap();
        let der = id.certificate_chain().as_slice()[0].der().to_vec();
        // Find the two UTCTime values (tag 0x17, length 13) of the validity sequence.
        let times: Vec<String> = der
            .windows(15)
            .filter(|w| w[0] == 0x17 && w[1] == 13)
            .map(|w| String::from_utf8_lossy(&w[2..15]).into_owned())
            .take(2)
            .collect();
        assert_eq!(times.len(), 2, "validity not found");
        let parse = |s: &str| {
            let n = |r: std::ops::Range<usize>| s[r].parse::<u8>().unwrap();
            let date = time::Date::from_calendar_date(
                2000 + i32::from(n(0..2)),
                time::Month::try_from(n(2..4)).unwrap(),
                n(4..6),
            )
            .unwrap();
            date.with_hms(n(6..8), n(8..10), n(10..12)).unwrap()
        };
        let span = parse(&times[1]) - parse(&times[0]);
        assert!(span <= time::Duration::days(14), "{span}");
        assert!(span >= time::Duration::days(12), "{span}");
    }
}
