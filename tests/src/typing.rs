//! Typing traces: keystrokes at a typist's pace, as probe script actions (one `type` per key),
//! and the shell environment they are typed into.
//!
//! A trace is written in a small notation: every character is one key, `{Name}` is a named key
//! (`{Enter}`, `{BS}` (DEL, what Backspace sends), `{Left}`, `{Right}`, `{Up}`, `{Down}`, `{Esc}`,
//! `{C-a}` .. `{C-z}`, `{M-b}`, `{M-f}`). [`TraceBuilder`] turns it into [`Action`]s with seeded
//! gaps between keys (60-200 ms, now and then a pause of 300-900 ms), waits for the output of a
//! command (`wait-text`, on something the typed text does not contain, so that a prediction can
//! never satisfy it) and a reading pause after it. The same actions drive `tern-probe` and the
//! stock mosh-client in tmux, so both get the same keys, the same gaps and the same waits.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tern_native::script::Action;

/// How long a trace waits for a command's output before failing.
pub const WAIT: Duration = Duration::from_secs(20);

/// The password typed at [`typing_env`]'s `signin` prompt. Its characters appear nowhere else in
/// the traces of this crate and the benchmark (no q, z or j in any command or output), so any
/// of them on a screen is the secret leaking.
pub const SECRET: &str = "zQjJqZ";

/// Whether `c` is one of [`SECRET`]'s characters.
pub fn is_secret_char(c: char) -> bool {
    SECRET.contains(c)
}

/// The prompt of [`typing_env`]: the command number in brackets, so each new prompt is text no
/// typed key can predict (`[3] tern$ `).
pub fn prompt(n: u32) -> String {
    format!("[{n}] tern$ ")
}

/// Extra environment for [`crate::mosh_client::start_reference_server_with`]:
/// * `PS1`: `[N] tern$ ` (see [`prompt`]);
/// * `RP`: the same prompt with a right prompt `(main)` drawn at column 66 (cursor saved and
///   restored, as zsh's RPROMPT looks on the screen); `PS1=$RP` switches to it;
/// * `signin`: a password prompt (`read -s`), then `got N chars`;
/// * `shout`: echoes every key in upper case (no echo of its own) until `.`;
/// * `VIMINIT`: vim without vimrc, `nocompatible`, and no wait after Esc (keys typed after Esc
///   arrive merged into one read at high RTT: they must mean the same as when they come apart).
pub fn typing_env() -> Vec<(String, String)> {
    let var = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    vec![
        var("PS1", "[\\#] tern$ "),
        var("RP", "[\\#] tern$ \\[\\e7\\e[66G(main)\\e8\\]"),
        var(
            "BASH_FUNC_signin%%",
            "() { read -r -s -p 'Password: ' s; echo; echo \"got ${#s} chars\"; }",
        ),
        var(
            "BASH_FUNC_shout%%",
            "() { local c; while IFS= read -r -s -n1 c && [ \"$c\" != . ]; do \
             if [ \"$c\" = \"\" ]; then printf '\\r\\n'; else printf %s \"${c^^}\"; fi; done; echo; }",
        ),
        var("VIMINIT", "set nocompatible ttimeout ttimeoutlen=0 noswapfile"),
    ]
}

/// The bytes of one key in the notation (see the module documentation).
fn named_key(name: &str) -> Option<Vec<u8>> {
    let bytes: &[u8] = match name {
        "Enter" => b"\r",
        "BS" => b"\x7f",
        "Tab" => b"\t",
        "Esc" => b"\x1b",
        "Left" => b"\x1b[D",
        "Right" => b"\x1b[C",
        "Up" => b"\x1b[A",
        "Down" => b"\x1b[B",
        "M-b" => b"\x1bb",
        "M-f" => b"\x1bf",
        _ => {
            let letter = name.strip_prefix("C-")?.as_bytes();
            return match letter {
                [c @ b'a'..=b'z'] => Some(vec![c - b'a' + 1]),
                _ => None,
            };
        }
    };
    Some(bytes.to_vec())
}

/// Splits the notation into keys.
///
/// # Panics
/// On an unknown `{Name}` or an unclosed brace: traces are written by hand in this repository.
pub fn keys(notation: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = notation;
    while let Some(c) = rest.chars().next() {
        if c == '{' {
            let end = rest.find('}').unwrap_or_else(|| panic!("unclosed brace in {notation:?}"));
            let name = &rest[1..end];
            out.push(named_key(name).unwrap_or_else(|| panic!("unknown key {{{name}}}")));
            rest = &rest[end + 1..];
        } else {
            let mut buf = [0u8; 4];
            out.push(c.encode_utf8(&mut buf).as_bytes().to_vec());
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Builds a trace: keys with seeded typist gaps, waits for output, pauses.
#[derive(Debug)]
pub struct TraceBuilder {
    rng: SmallRng,
    actions: Vec<Action>,
    /// The command number of the next prompt (see [`prompt`]).
    next_prompt: u32,
    /// Gaps between keys, ms (uniform), and the chance and range of a longer pause.
    gap_ms: (u64, u64),
    pause_chance: f64,
    pause_ms: (u64, u64),
}

impl TraceBuilder {
    /// A trace that starts by waiting for the first prompt of [`typing_env`]'s shell.
    pub fn new(seed: u64) -> TraceBuilder {
        let mut builder = TraceBuilder {
            rng: SmallRng::seed_from_u64(seed),
            actions: Vec::new(),
            next_prompt: 1,
            gap_ms: (60, 200),
            pause_chance: 0.08,
            pause_ms: (300, 900),
        };
        builder.wait_prompt();
        builder
    }

    /// Other gaps between keys (uniform in `min..=max` ms), and no long pauses.
    pub fn gaps(mut self, min_ms: u64, max_ms: u64) -> TraceBuilder {
        self.gap_ms = (min_ms, max_ms);
        self.pause_chance = 0.0;
        self
    }

    /// Types the keys of `notation`, each followed by a typist's gap.
    pub fn keys(&mut self, notation: &str) -> &mut TraceBuilder {
        for key in keys(notation) {
            self.actions.push(Action::Type(key));
            let gap = if self.rng.random_bool(self.pause_chance) {
                self.rng.random_range(self.pause_ms.0..=self.pause_ms.1)
            } else {
                self.rng.random_range(self.gap_ms.0..=self.gap_ms.1)
            };
            self.actions.push(Action::Sleep(Duration::from_millis(gap)));
        }
        self
    }

    /// Types the keys of `notation` as one input event (a burst that reaches the client in one
    /// read), followed by a typist's gap.
    pub fn burst(&mut self, notation: &str) -> &mut TraceBuilder {
        self.actions.push(Action::Type(keys(notation).concat()));
        let gap = self.rng.random_range(self.gap_ms.0..=self.gap_ms.1);
        self.actions.push(Action::Sleep(Duration::from_millis(gap)));
        self
    }

    /// Waits until `text` is on the screen, then pauses as a person reading it would.
    pub fn wait(&mut self, text: &str) -> &mut TraceBuilder {
        self.actions.push(Action::WaitText { text: text.to_owned(), timeout: WAIT });
        let read = self.rng.random_range(300..=800);
        self.actions.push(Action::Sleep(Duration::from_millis(read)));
        self
    }

    /// Waits for the next shell prompt (`[N] tern$`).
    pub fn wait_prompt(&mut self) -> &mut TraceBuilder {
        let n = self.next_prompt;
        self.next_prompt += 1;
        self.wait(prompt(n).trim_end())
    }

    /// Types a shell command line (notation), Enter, and waits for the next prompt.
    pub fn command(&mut self, notation: &str) -> &mut TraceBuilder {
        self.keys(notation).keys("{Enter}").wait_prompt()
    }

    /// A pause of exactly this long.
    pub fn pause(&mut self, ms: u64) -> &mut TraceBuilder {
        self.actions.push(Action::Sleep(Duration::from_millis(ms)));
        self
    }

    /// The command number the next prompt will show.
    pub fn next_prompt(&self) -> u32 {
        self.next_prompt
    }

    pub fn build(&self) -> Vec<Action> {
        self.actions.clone()
    }
}

/// The number of keys (`type` actions) in a trace.
pub fn key_count(actions: &[Action]) -> usize {
    actions.iter().filter(|a| matches!(a, Action::Type(_))).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notation_splits_into_keys() {
        assert_eq!(
            keys("ab{BS}{Left}{C-a}{Enter}é"),
            vec![
                b"a".to_vec(),
                b"b".to_vec(),
                b"\x7f".to_vec(),
                b"\x1b[D".to_vec(),
                vec![1],
                b"\r".to_vec(),
                "é".as_bytes().to_vec()
            ]
        );
    }

    #[test]
    #[should_panic(expected = "unknown key")]
    fn unknown_names_panic() {
        keys("{Hyper}");
    }

    #[test]
    fn traces_are_seeded_and_wait_for_prompts() {
        let trace = |seed| TraceBuilder::new(seed).command("ls").build();
        assert_eq!(trace(1), trace(1));
        assert_ne!(trace(1), trace(2));
        let actions = trace(1);
        assert_eq!(key_count(&actions), 3);
        assert!(matches!(&actions[0], Action::WaitText { text, .. } if text == "[1] tern$"));
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::WaitText { text, .. } if text == "[2] tern$"))
        );
    }

    #[test]
    fn the_secret_is_not_in_the_environment() {
        for (name, value) in typing_env() {
            assert!(!name.contains(is_secret_char) && !value.contains(is_secret_char), "{name}");
        }
    }
}
