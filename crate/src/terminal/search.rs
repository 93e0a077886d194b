//! Search in scrollback history: a pattern compiled once, matched against many plain lines.
//!
//! Lines are searched as [`plain`](super::plain) text (escapes stripped), one at a time, and
//! matches come back as char offsets into that text: what
//! [`line_html`](super::line_html) takes as its marks.
//!
//! What it does not do: match across lines, return empty matches (a pattern such as `a*` matches
//! where it matches something), or give `\p{..}` Unicode classes (left out to keep the wasm
//! small: such a pattern is a [`QueryError::BadRegex`]).

use regex::{Regex, RegexBuilder};

/// The most memory one compiled pattern may take; a hostile pattern (`\w{1000}{1000}`) is refused
/// instead of growing the page's heap. Ordinary searches need a few kilobytes.
const SIZE_LIMIT: usize = 1 << 20;

/// A search pattern, compiled once for all the lines it is run against.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    regex: Regex,
}

/// Why a pattern cannot be searched for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// Nothing to search for.
    #[error("empty search pattern")]
    Empty,
    /// Not a valid regular expression, or too large; the message is short, for a status line.
    #[error("bad regular expression: {0}")]
    BadRegex(String),
}

impl SearchQuery {
    /// Compiles `pattern`: taken literally unless `regex`, and ignoring case (Unicode simple case
    /// folding: `é` finds `É`) unless `case_sensitive`.
    pub fn new(
        pattern: &str,
        case_sensitive: bool,
        regex: bool,
    ) -> Result<SearchQuery, QueryError> {
        if pattern.is_empty() {
            return Err(QueryError::Empty);
        }
        let source = if regex { pattern.to_owned() } else { regex::escape(pattern) };
        let regex = RegexBuilder::new(&source)
            .case_insensitive(!case_sensitive)
            .size_limit(SIZE_LIMIT)
            .build()
            .map_err(|e| QueryError::BadRegex(short_message(&e)))?;
        Ok(SearchQuery { regex })
    }

    /// The non-empty matches in one line of plain text, left to right and not overlapping, as char
    /// offsets `[start, end)`.
    pub fn find(&self, text: &str) -> Vec<(usize, usize)> {
        let matches = self.regex.find_iter(text).filter(|m| !m.is_empty());
        if text.is_ascii() {
            // One byte per char: byte offsets are char offsets.
            return matches.map(|m| (m.start(), m.end())).collect();
        }
        // Matches come in increasing order: count chars once, from one offset to the next.
        let (mut byte, mut chars) = (0, 0);
        let mut char_at = |to: usize| {
            chars += text[byte..to].chars().count();
            byte = to;
            chars
        };
        matches.map(|m| (char_at(m.start()), char_at(m.end()))).collect()
    }

    /// Whether the line has a match [`find`](Self::find) would return (for counting lines).
    pub fn is_match(&self, text: &str) -> bool {
        // `is_match` stops at the first match without finding its end: the fast answer for the
        // many lines that do not match. A pattern that can match empty needs the real matches.
        self.regex.is_match(text) && self.regex.find_iter(text).any(|m| !m.is_empty())
    }
}

/// The gist of a regex error: "unclosed group", not the multi-line caret picture.
fn short_message(e: &regex::Error) -> String {
    let full = e.to_string();
    // A syntax error reads "regex parse error:\n    <pattern>\n    ^\nerror: <what>".
    let line = full
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .or_else(|| full.lines().next())
        .unwrap_or("invalid pattern");
    line.trim().trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(pattern: &str, case_sensitive: bool, regex: bool, text: &str) -> Vec<(usize, usize)> {
        SearchQuery::new(pattern, case_sensitive, regex).unwrap().find(text)
    }

    #[test]
    fn a_literal_pattern_finds_its_text_and_regex_characters_are_plain() {
        assert_eq!(find("a.b", true, false, "axb a.b a.b"), [(4, 7), (8, 11)]);
        assert_eq!(find("(x", true, false, "f(x)"), [(1, 3)]);
        assert_eq!(find("a.b", true, true, "axb a.b"), [(0, 3), (4, 7)]);
    }

    #[test]
    fn matches_do_not_overlap() {
        assert_eq!(find("aa", true, false, "aaaaa"), [(0, 2), (2, 4)]);
    }

    #[test]
    fn case_is_ignored_unless_asked_including_non_ascii() {
        assert_eq!(find("error", false, false, "Error ERROR error"), [(0, 5), (6, 11), (12, 17)]);
        assert_eq!(find("error", true, false, "Error ERROR error"), [(12, 17)]);
        assert_eq!(find("été", false, false, "ÉTÉ"), [(0, 3)]);
        assert!(find("été", true, false, "ÉTÉ").is_empty());
    }

    #[test]
    fn offsets_count_chars_not_bytes() {
        // é is two bytes, 中 three: offsets after them would drift if bytes were returned.
        assert_eq!(find("x", true, false, "é中x é中x"), [(2, 3), (6, 7)]);
        assert_eq!(find("中", true, false, "a中b中"), [(1, 2), (3, 4)]);
        assert_eq!(find("\\w+", true, true, "é中 ab"), [(0, 2), (3, 5)]);
    }

    #[test]
    fn patterns_that_match_empty_return_only_non_empty_matches() {
        assert_eq!(find("a*", true, true, "baab a"), [(1, 3), (5, 6)]);
        assert!(find("x*", true, true, "abc").is_empty());
        assert!(find("^", true, true, "abc").is_empty());
        let q = SearchQuery::new("a*", true, true).unwrap();
        assert!(q.is_match("baab"));
        assert!(!q.is_match("bbb"), "an empty match does not count");
        assert!(!q.is_match(""));
    }

    #[test]
    fn is_match_agrees_with_find() {
        let q = SearchQuery::new("中+", true, true).unwrap();
        for text in ["", "a", "中", "x中中y", "é"] {
            assert_eq!(q.is_match(text), !q.find(text).is_empty(), "{text:?}");
        }
    }

    #[test]
    fn an_empty_pattern_is_refused() {
        assert_eq!(SearchQuery::new("", true, false).unwrap_err(), QueryError::Empty);
        assert_eq!(SearchQuery::new("", false, true).unwrap_err(), QueryError::Empty);
    }

    #[test]
    fn a_bad_regex_says_what_is_wrong_in_one_line() {
        let Err(QueryError::BadRegex(msg)) = SearchQuery::new("a(b", true, true) else {
            panic!("accepted");
        };
        assert_eq!(msg, "unclosed group");
        let Err(QueryError::BadRegex(msg)) = SearchQuery::new("[z-a]", true, true) else {
            panic!("accepted");
        };
        assert!(!msg.contains('\n') && !msg.is_empty(), "{msg:?}");
        // The same text taken literally is fine.
        assert_eq!(find("a(b", true, false, "xa(b"), [(1, 4)]);
    }

    #[test]
    fn a_huge_pattern_is_refused_not_compiled() {
        let Err(QueryError::BadRegex(msg)) = SearchQuery::new(r"\w{1000}{1000}", true, true) else {
            panic!("accepted");
        };
        assert!(msg.contains("size limit"), "{msg:?}");
    }
}
