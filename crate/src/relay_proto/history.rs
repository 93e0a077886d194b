//! A session's history (spawn mode): the page reads pages of it and searches it, on requests of
//! its own beside the session (`POST` with a JSON body, so a search pattern never appears in a
//! URL or a log line, and a 100,000-line history costs nothing until someone scrolls or searches).
//!
//! ```text
//!  page ─ POST HISTORY_PATH        HistoryRequest ─▶ relay ─▶ HistoryPage        | ApiError
//!  page ─ POST HISTORY_SEARCH_PATH HistorySearch  ─▶ relay ─▶ HistorySearchResult | ApiError
//! ```
//!
//! Lines are numbered from the session's first line (0) on, so a number stays the same while the
//! program prints more: the history holds lines `first..end`, older ones were dropped (it is
//! bounded by `--history-lines`). A line is text with SGR escapes (`tern::terminal::HistoryLines`);
//! match offsets are in characters of the line without its escapes (`tern::terminal::plain`).

use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;

/// Route of [`HistoryRequest`].
pub const HISTORY_PATH: &str = "/api/history";
/// Route of [`HistorySearch`].
pub const HISTORY_SEARCH_PATH: &str = "/api/history/search";
/// Most lines one page may ask for.
pub const MAX_PAGE_LINES: u32 = 2000;
/// Most matches one search returns (the count beyond is still exact: `match_lines`).
pub const MAX_SEARCH_HITS: u32 = 10_000;
/// Longest request body the relay reads.
pub const MAX_REQUEST: usize = 4096;

/// Up to `count` lines just before line `before` (the newest lines when `before` is absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRequest {
    pub session: String,
    pub before: Option<u64>,
    pub count: u32,
}

/// Lines `start..start + lines.len()`, oldest first, of a history that holds `first..end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryPage {
    pub first: u64,
    pub end: u64,
    pub start: u64,
    pub lines: Vec<String>,
}

/// Every line of the history matching `pattern` (a literal unless `regex`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistorySearch {
    pub session: String,
    pub pattern: String,
    pub case_sensitive: bool,
    pub regex: bool,
}

/// One match: characters `start..end` of line `line`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchHit {
    pub line: u64,
    pub start: u32,
    pub end: u32,
}

/// The matches, oldest first: the newest [`MAX_SEARCH_HITS`] when there are more (`truncated`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistorySearchResult {
    pub first: u64,
    pub end: u64,
    pub hits: Vec<SearchHit>,
    /// Matches in the whole history (more than `hits.len()` when truncated).
    pub total_hits: u64,
    pub truncated: bool,
}

impl Message for HistoryRequest {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("session", &self.session)
            .opt_u64("before", self.before)
            .u64("count", self.count.into());
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        f.only(&["session", "before", "count"])?;
        Ok(HistoryRequest {
            session: f.str("session")?,
            before: f.opt_u64("before")?,
            count: f.int("count")?,
        })
    }
}

impl Message for HistoryPage {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.u64("first", self.first)
            .u64("end", self.end)
            .u64("start", self.start)
            .strings("lines", &self.lines);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        Ok(HistoryPage {
            first: f.u64("first")?,
            end: f.u64("end")?,
            start: f.u64("start")?,
            lines: f.strings("lines")?,
        })
    }
}

impl Message for HistorySearch {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("session", &self.session)
            .str("pattern", &self.pattern)
            .bool("case_sensitive", self.case_sensitive)
            .bool("regex", self.regex);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        f.only(&["session", "pattern", "case_sensitive", "regex"])?;
        Ok(HistorySearch {
            session: f.str("session")?,
            pattern: f.str("pattern")?,
            case_sensitive: f.bool("case_sensitive")?,
            regex: f.bool("regex")?,
        })
    }
}

impl Message for HistorySearchResult {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.u64("first", self.first)
            .u64("end", self.end)
            .objects("hits", &self.hits, |w, h| {
                w.u64("line", h.line).u64("start", h.start.into()).u64("end", h.end.into());
            })
            .u64("total_hits", self.total_hits)
            .bool("truncated", self.truncated);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        let hits = f
            .array("hits")?
            .iter()
            .map(|v| {
                let h = Fields::of(v, "hits")?;
                Ok(SearchHit { line: h.u64("line")?, start: h.int("start")?, end: h.int("end")? })
            })
            .collect::<Result<_, DecodeError>>()?;
        Ok(HistorySearchResult {
            first: f.u64("first")?,
            end: f.u64("end")?,
            hits,
            total_hits: f.u64("total_hits")?,
            truncated: f.bool("truncated")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::{decode, encode};

    #[test]
    fn every_history_message_round_trips() {
        let req = HistoryRequest { session: "ab12".into(), before: Some(70), count: 500 };
        assert_eq!(decode::<HistoryRequest>(&encode(&req)).unwrap(), req);
        let newest = HistoryRequest { before: None, ..req.clone() };
        assert_eq!(decode::<HistoryRequest>(&encode(&newest)).unwrap(), newest);
        let page = HistoryPage {
            first: 3,
            end: 9,
            start: 7,
            lines: vec!["\x1b[0;31mred\x1b[0m \"q\"".into(), "é 中".into()],
        };
        assert_eq!(decode::<HistoryPage>(&encode(&page)).unwrap(), page);
        let search = HistorySearch {
            session: "ab12".into(),
            pattern: "a.*\\d".into(),
            case_sensitive: true,
            regex: true,
        };
        assert_eq!(decode::<HistorySearch>(&encode(&search)).unwrap(), search);
        let result = HistorySearchResult {
            first: 0,
            end: 100_000,
            hits: vec![SearchHit { line: 50_000, start: 0, end: 5 }],
            total_hits: 1,
            truncated: false,
        };
        assert_eq!(decode::<HistorySearchResult>(&encode(&result)).unwrap(), result);
    }

    #[test]
    fn requests_with_unknown_fields_or_huge_counts_are_refused() {
        assert!(decode::<HistoryRequest>(br#"{"session":"a","count":1,"path":"/etc"}"#).is_err());
        assert!(decode::<HistoryRequest>(br#"{"session":"a","count":99999999999}"#).is_err());
        assert!(decode::<HistorySearch>(br#"{"session":"a","pattern":"x"}"#).is_err());
    }
}
