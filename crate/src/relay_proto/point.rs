//! The resume point as the control stream carries it: the relay's copy of a session in `ready`,
//! the page's own point in `seed`.
//!
//! On the wire it is one JSON string, the standard base64 (padded) of
//! [`ResumePoint::encode`]. Parsing it here, with the message, gives both ends the same typed
//! value. A string that is not a point does not make its message malformed: it arrives as
//! [`CarriedPoint::Unreadable`], and the receiver goes on without a point (the relay ignores
//! such a seed, a page such a `ready.point`), as it did when the text was decoded later.

use std::fmt;

use base64::Engine as _;

use crate::session::ResumePoint;

/// A resume point in a control message (see the module documentation).
#[derive(Clone, PartialEq, Eq)]
pub enum CarriedPoint {
    Point(ResumePoint),
    /// Text that is not a point's base64, kept as it came so that it is written back unchanged.
    Unreadable(String),
}

impl CarriedPoint {
    /// Reads the wire text; never fails (see [`CarriedPoint::Unreadable`]).
    pub fn from_text(text: &str) -> CarriedPoint {
        let point = base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()
            .and_then(|bytes| ResumePoint::decode(&bytes).ok());
        match point {
            Some(p) => CarriedPoint::Point(p),
            None => CarriedPoint::Unreadable(text.to_owned()),
        }
    }

    /// The wire text.
    pub fn to_text(&self) -> String {
        match self {
            CarriedPoint::Point(p) => Self::text_of(p),
            CarriedPoint::Unreadable(text) => text.clone(),
        }
    }

    /// The wire text of `point`, without making a `CarriedPoint` of it.
    pub fn text_of(point: &ResumePoint) -> String {
        base64::engine::general_purpose::STANDARD.encode(point.encode())
    }

    /// The point, when the text was one.
    pub fn point(&self) -> Option<&ResumePoint> {
        match self {
            CarriedPoint::Point(p) => Some(p),
            CarriedPoint::Unreadable(_) => None,
        }
    }

    /// The point, when the text was one, by value.
    pub fn into_point(self) -> Option<ResumePoint> {
        match self {
            CarriedPoint::Point(p) => Some(p),
            CarriedPoint::Unreadable(_) => None,
        }
    }
}

impl From<ResumePoint> for CarriedPoint {
    fn from(point: ResumePoint) -> Self {
        CarriedPoint::Point(point)
    }
}

/// The wire text read as a point (tests and corpora write points as their text).
impl From<&str> for CarriedPoint {
    fn from(text: &str) -> Self {
        CarriedPoint::from_text(text)
    }
}

/// The wire text (base64), as tab storage keeps a point too.
impl fmt::Display for CarriedPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl fmt::Debug for CarriedPoint {
    /// The point's sizes and numbers ([`ResumePoint`]'s own `Debug`), or the unreadable text's
    /// length: never the screen, the input or the sender's text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CarriedPoint::Point(p) => f.debug_tuple("Point").field(p).finish(),
            CarriedPoint::Unreadable(text) => {
                f.debug_struct("Unreadable").field("len", &text.len()).finish()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::StateNum;

    fn point() -> ResumePoint {
        ResumePoint {
            server_num: StateNum(12),
            screen_cols: 80,
            screen_rows: 24,
            screen: b"secret screen".to_vec(),
            input_acked: StateNum(4),
            input_next: StateNum(9),
            input_pending: b"hunter2".to_vec(),
            next_seq: 300,
            next_fragment_id: 40,
        }
    }

    #[test]
    fn a_point_travels_as_the_base64_of_its_encoding() {
        let carried = CarriedPoint::from(point());
        let text = carried.to_text();
        let expected = base64::engine::general_purpose::STANDARD.encode(point().encode());
        assert_eq!(text, expected);
        assert_eq!(carried.to_string(), expected);
        assert_eq!(CarriedPoint::from_text(&text), carried);
        assert_eq!(CarriedPoint::from_text(&text).into_point(), Some(point()));
    }

    #[test]
    fn text_that_is_not_a_point_is_kept_but_gives_no_point() {
        for bad in ["not base64!", "VFJQMQ==", ""] {
            let carried = CarriedPoint::from(bad);
            assert_eq!(carried, CarriedPoint::Unreadable(bad.to_owned()));
            assert_eq!(carried.point(), None);
            assert_eq!(carried.to_text(), bad, "written back as it came");
        }
    }

    #[test]
    fn debug_shows_neither_the_screen_nor_the_input_nor_the_text() {
        let shown = format!("{:?}", CarriedPoint::from(point()));
        assert!(!shown.contains("secret") && !shown.contains("hunter2"), "{shown}");
        let text = CarriedPoint::from(point()).to_text();
        assert!(!shown.contains(&text[..8]), "{shown}");
        let unreadable = format!("{:?}", CarriedPoint::from("c2VjcmV0"));
        assert!(!unreadable.contains("c2Vj"), "{unreadable}");
    }
}
