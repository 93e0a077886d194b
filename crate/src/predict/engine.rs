//! The prediction state machine: epochs, cell and cursor predictions, judging, triggers, overlay.
//! PREDICTION.md's section numbers are cited where a rule comes from.

use std::sync::Arc;
use std::time::Duration;

use crate::terminal::{Attrs, Cell, Color, Framebuffer, Pos, Size};
use crate::time::Instant;
use crate::wire::StateNum;

use super::input::{Key, events};
use super::{
    GLITCH_PENDING, JUDGE_INTERVAL, LONG_GLITCH_PENDING, PASTE_BYTES, PredictConfig, PredictMode,
};

/// A confirmation this soon after its prediction counts as a quick one (lowers the glitch counter).
const QUICK_CONFIRM: Duration = Duration::from_millis(250);
/// Quick confirmations lower the glitch counter at most this often.
const GLITCH_DECAY_SPACING: Duration = Duration::from_millis(150);
/// Glitch counter levels: above 0 shows predictions, above `FLAG_GLITCHES` underlines them.
const GLITCH_SHOW: u32 = 10;
const GLITCH_LONG: u32 = 20;
const FLAG_GLITCHES: u32 = 10;
/// Send-interval thresholds of the show trigger and of flagging (§6).
const SHOW_ON: Duration = Duration::from_millis(30);
const SHOW_OFF: Duration = Duration::from_millis(20);
const FLAG_ON: Duration = Duration::from_millis(80);
const FLAG_OFF: Duration = Duration::from_millis(50);

/// What the predictor did, for `stats()` and the benchmark.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PredictCounters {
    /// Typed characters predicted.
    pub made: u64,
    /// Predictions drawn at least once.
    pub drawn: u64,
    /// Predictions the server's frame confirmed.
    pub confirmed: u64,
    /// Drawn predictions the server's frame contradicted (each erased by the next frame).
    pub wrong_drawn: u64,
    /// Tentative epochs dropped because one of their predictions was wrong.
    pub epochs_killed: u64,
    /// Everything dropped (resize, paste, a wrong shown prediction, a wrong cursor).
    pub resets: u64,
    /// Epochs confirmed at once because their first key was typed at a prompt that echoed
    /// before (see `Predictor::at_known_prompt`).
    pub prompt_confirmed: u64,
}

/// Prompts remembered (the most recently used few): a shell's, a REPL's.
const KNOWN_PROMPTS: usize = 8;
/// A prompt has at least this many non-blank characters (a bare `$` or `>` proves little).
const MIN_PROMPT: usize = 2;

/// One predicted cell.
#[derive(Clone, Debug)]
struct CellPrediction {
    epoch: u64,
    /// The client state that carries the key; judged once the echo ack reaches it.
    carrier: StateNum,
    made_at: Instant,
    /// `None`: the content cannot be known (shifted in from or out at the margin).
    content: Option<Cell>,
    /// Texts the cell held or was predicted to hold while predictions touched it: a server cell
    /// equal to one of these proves nothing.
    original: Vec<String>,
    /// The typed key's own cell (not one shifted along by it): what the cursor check compares,
    /// and the only kind of prediction whose match confirms an epoch.
    typed: bool,
    /// Moved along by an insert or a Backspace: rebuilt from each new server frame.
    shifted: bool,
    drawn: bool,
}

#[derive(Clone, Copy, Debug)]
struct CursorPrediction {
    row: usize,
    col: usize,
    epoch: u64,
    carrier: StateNum,
    /// Where the keys up to `carrier` put the cursor (false: a restart at the server's cursor
    /// after a killed epoch, which is no evidence of anything).
    from_keys: bool,
}

/// How a prediction fared against the server frame.
enum Verdict {
    Pending,
    /// Right, but no evidence (blank or unknown content, or the cell held this before).
    Retire,
    Correct,
    Wrong,
}

/// Predictive local echo for one session. See the module documentation of `predict`.
#[derive(Debug, Clone)]
pub struct Predictor {
    config: PredictConfig,
    /// Predicted cells by row (sorted by row; a few rows at most); one slot per column. A Vec,
    /// not a map: it keeps the page's wasm smaller and is as fast for a handful of rows.
    rows: Vec<(usize, Vec<Option<CellPrediction>>)>,
    cursors: Vec<CursorPrediction>,
    /// The epoch new predictions get, and the newest confirmed one (§2).
    epoch: u64,
    confirmed: u64,
    srtt_trigger: bool,
    flagging: bool,
    glitches: u32,
    last_decay: Option<Instant>,
    last_judge: Option<Instant>,
    /// The server frame's size at the last look: a change resets.
    size: Option<Size>,
    counters: PredictCounters,
    /// Prompts at which typing was echoed (positive evidence), digits masked: an epoch whose first
    /// key is typed at one of them again is confirmed at once.
    prompts: Vec<String>,
    /// The prompt the tentative epoch's first key was typed at, learned if the epoch is confirmed.
    candidate: Option<(u64, String)>,
    /// Insert-mode keys whose shifted cells are rebuilt from every new server frame.
    ops: Vec<RowOp>,
    /// The rules before issue 36: no known prompts, shifted cells kept as first predicted.
    before_36: bool,
}

/// One insert-mode key on a row, kept until the echo ack covers it: the shifted cells of the
/// row are rebuilt from each new server frame by replaying the keys it does not show yet (a `~`
/// that vim's new line replaced must not be pushed along by what is typed on it).
#[derive(Clone, Debug)]
struct RowOp {
    row: usize,
    /// The typed key's column (the cell Backspace empties: one left of the cursor).
    col: usize,
    carrier: StateNum,
    epoch: u64,
    /// The typed character, or `None` for Backspace.
    insert: Option<Cell>,
}

impl Predictor {
    pub fn new(config: PredictConfig) -> Self {
        Predictor {
            config,
            rows: Vec::new(),
            cursors: Vec::new(),
            epoch: 1,
            confirmed: 0,
            // Both start on: before any RTT sample the send interval is taken as 250 ms (§6).
            srtt_trigger: true,
            flagging: true,
            glitches: 0,
            last_decay: None,
            last_judge: None,
            size: None,
            counters: PredictCounters::default(),
            prompts: Vec::new(),
            candidate: None,
            ops: Vec::new(),
            before_36: false,
        }
    }

    /// The rules before issue 36 (no prompt that echoed before confirms a new line, shifted
    /// cells are not rebuilt and may confirm an epoch): for the benchmark's rows side by side.
    pub fn set_rules_before_36(&mut self, on: bool) {
        self.before_36 = on;
        self.reset();
    }

    pub fn config(&self) -> PredictConfig {
        self.config
    }

    /// A new mode: everything predicted so far is dropped.
    pub fn set_config(&mut self, config: PredictConfig) {
        self.config = config;
        self.reset();
    }

    pub fn counters(&self) -> &PredictCounters {
        &self.counters
    }

    /// Whether confirmed predictions are drawn now.
    pub fn showing(&self) -> bool {
        match self.config.mode {
            PredictMode::Never => false,
            PredictMode::Adaptive => self.srtt_trigger || self.glitches > 0,
            PredictMode::Always | PredictMode::Experimental => true,
        }
    }

    /// Whether drawn predictions are underlined (a slow link or late echoes).
    pub fn flagging(&self) -> bool {
        self.flagging || self.glitches > FLAG_GLITCHES
    }

    /// Anything predicted and not yet judged.
    pub fn outstanding(&self) -> bool {
        !self.cursors.is_empty() || self.rows.iter().flat_map(|(_, s)| s).any(Option::is_some)
    }

    /// Drops every prediction and starts a new epoch (§7).
    pub fn reset(&mut self) {
        if self.outstanding() {
            self.counters.resets += 1;
        }
        self.rows.clear();
        self.cursors.clear();
        self.ops.clear();
        self.new_epoch();
    }

    /// Keys of one input event, about to be sent in client state `carrier`, typed over `server`
    /// (the newest server frame). A paste (a long batch or a bracketed-paste marker) predicts
    /// nothing and resets.
    pub fn on_keys(&mut self, now: Instant, bytes: &[u8], carrier: StateNum, server: &Framebuffer) {
        if self.config.mode == PredictMode::Never {
            return;
        }
        self.check_size(server);
        let keys = events(bytes);
        if bytes.len() > PASTE_BYTES || keys.contains(&Key::PasteStart) {
            self.reset();
            return;
        }
        for key in keys {
            if self.config.mode == PredictMode::Experimental {
                self.epoch = self.confirmed;
            }
            match key {
                Key::Print(ch) => self.print(now, ch, carrier, server),
                Key::Delete => self.delete(now, carrier, server),
                Key::Return => {
                    self.new_epoch();
                    self.newline(now, carrier, server);
                }
                Key::Right => self.step(1, carrier, server),
                Key::Left => self.step(-1, carrier, server),
                Key::Other | Key::PasteStart => self.new_epoch(),
            }
        }
    }

    /// Judges every prediction against `server`, whose echo ack is `late_ack`; `last_sent` is the
    /// newest client state sent; `send_interval` drives the triggers (§5, §6).
    pub fn judge(
        &mut self,
        now: Instant,
        server: &Framebuffer,
        late_ack: StateNum,
        last_sent: StateNum,
        send_interval: Duration,
    ) {
        if self.config.mode == PredictMode::Never {
            return;
        }
        self.last_judge = Some(now);
        self.check_size(server);
        self.update_triggers(send_interval);
        self.rebuild_shifts(server, late_ack);
        let positions: Vec<(usize, usize)> = self
            .rows
            .iter()
            .flat_map(|&(row, ref slots)| {
                slots.iter().enumerate().filter(|(_, s)| s.is_some()).map(move |(c, _)| (row, c))
            })
            .collect();
        for (row, col) in positions {
            let Some(p) = self.get(row, col).cloned() else { continue };
            match self.verdict(now, &p, row, col, server, late_ack) {
                Verdict::Pending => {}
                Verdict::Retire => self.clear(row, col),
                // Something else drawn where later keys were predicted (a prompt appearing
                // under keys typed ahead of it): this match may be the prompt's own letter, so
                // it confirms nothing (beyond mosh, which shows the rest of a password there).
                Verdict::Correct if self.overdrawn(p.carrier, server) => self.clear(row, col),
                Verdict::Correct => self.correct(now, &p, row, col, server),
                Verdict::Wrong if self.config.mode == PredictMode::Experimental => {
                    self.counters.wrong_drawn += u64::from(p.drawn);
                    self.clear(row, col);
                }
                Verdict::Wrong if p.epoch > self.confirmed => {
                    self.kill_epoch(p.epoch, server, late_ack, last_sent);
                }
                Verdict::Wrong => {
                    self.counters.wrong_drawn += u64::from(p.drawn);
                    self.reset();
                    return;
                }
            }
        }
        self.judge_cursor(server, late_ack);
        self.rows.retain(|(_, slots)| slots.iter().any(Option::is_some));
        // Keys that had their time to be echoed are in the frame: no longer replayed.
        self.ops.retain(|o| o.carrier > late_ack);
    }

    /// When the judge should run again on its own (a stalled echo must become visible).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.config.mode == PredictMode::Never || !self.outstanding() {
            return None;
        }
        if self.glitches > 0 && self.flagging() {
            return None;
        }
        Some(self.last_judge.map_or(Instant::ZERO, |t| t + JUDGE_INTERVAL))
    }

    /// `server` with the predictions drawn (§8): confirmed ones (all in experimental mode), and
    /// underlined while flagging. The notification bar goes over this.
    pub fn overlay(&mut self, server: &Framebuffer) -> Framebuffer {
        let mut fb = server.clone();
        if !self.showing() {
            return fb;
        }
        let (width, height) = (fb.width, fb.height);
        let confirmed = self.confirmed;
        let shown = |epoch: u64| epoch <= confirmed;
        if let Some(c) = self.cursors.iter().rev().find(|c| shown(c.epoch)) {
            if c.row < height && c.col < width {
                fb.cursor_row = c.row;
                fb.cursor_col = c.col;
            }
        }
        let flag = self.flagging();
        let mut newly_drawn = 0;
        for (row, slots) in self.rows.iter_mut() {
            let row = *row;
            if row >= height {
                continue;
            }
            let mut cells: Option<crate::terminal::Row> = None;
            for (col, slot) in slots.iter_mut().enumerate().take(width) {
                let Some(p) = slot.as_mut().filter(|p| shown(p.epoch)) else { continue };
                let row_cells = cells.get_or_insert_with(|| (*fb.rows[row]).clone());
                let real = row_cells.cells()[col];
                let drawn = match &p.content {
                    None if flag && col + 1 < width => {
                        let mut cell = real;
                        cell.renditions.attrs.set(Attrs::UNDERLINE, true);
                        Some(cell)
                    }
                    None => None,
                    Some(c) if *c == real => None,
                    Some(c) => {
                        let mut cell = *c;
                        let blank_over_blank = c.is_blank() && real.is_blank();
                        if flag && !blank_over_blank {
                            cell.renditions.attrs.set(Attrs::UNDERLINE, true);
                        }
                        Some(cell)
                    }
                };
                if let Some(cell) = drawn {
                    row_cells.cells_mut()[col] = cell;
                    if !p.drawn && p.content.is_some() {
                        p.drawn = true;
                        newly_drawn += 1;
                    }
                }
            }
            if let Some(cells) = cells {
                fb.rows[row] = Arc::new(cells);
            }
        }
        self.counters.drawn += newly_drawn;
        fb
    }

    // --- Making predictions (§3, §4) -------------------------------------------------------

    fn new_epoch(&mut self) {
        if self.config.mode != PredictMode::Experimental {
            self.epoch += 1;
        }
    }

    /// The predicted cursor: the newest cursor prediction, else the server's.
    fn cursor(&self, server: &Framebuffer) -> (usize, usize) {
        self.cursors.last().map_or((server.cursor_row, server.cursor_col), |c| (c.row, c.col))
    }

    /// One cursor prediction per input event (the judge compares the server's cursor with each).
    fn move_cursor(&mut self, row: usize, col: usize, carrier: StateNum) {
        match self.cursors.last_mut() {
            Some(c) if c.epoch == self.epoch && c.carrier == carrier => (c.row, c.col) = (row, col),
            _ => self.cursors.push(CursorPrediction {
                row,
                col,
                epoch: self.epoch,
                carrier,
                from_keys: true,
            }),
        }
    }

    fn print(&mut self, now: Instant, ch: char, carrier: StateNum, server: &Framebuffer) {
        let (row, col) = self.cursor(server);
        let width = server.width;
        if row >= server.height || col >= width {
            self.new_epoch();
            return;
        }
        if self.epoch > self.confirmed
            && self.config.mode != PredictMode::Experimental
            && !self.before_36
        {
            self.at_known_prompt(row, col, server);
        }
        let last_column = col + 1 >= width;
        if last_column {
            // Applications differ at the margin: it re-earns confidence (§4).
            self.new_epoch();
        } else if !self.config.overwrite {
            // Insert: the text after the cursor moves right, up to the first gap of two blanks;
            // what lies beyond it (a right prompt, fish's suggestion column) stays, as shells
            // keep it (shifting it drew a wrong prompt for a round trip on every key).
            let end = self.text_run_end(row, col, server);
            for i in (col + 1..=end).rev() {
                let content = if i + 1 == width { None } else { self.value(row, i - 1, server) };
                self.place(now, row, i, content, carrier, server);
                self.mark_shifted(row, i);
            }
        }
        // The server's pen, overridden by the renditions of the cell to the left.
        let renditions = match col.checked_sub(1).and_then(|left| self.value(row, left, server)) {
            Some(left) => left.renditions,
            None => server.pen(),
        };
        let mut text = [0u8; 4];
        let cell = Cell::new(ch.encode_utf8(&mut text), renditions, false);
        if !self.config.overwrite {
            let epoch = self.epoch;
            self.ops.push(RowOp { row, col, carrier, epoch, insert: Some(cell) });
        }
        self.place(now, row, col, Some(cell), carrier, server);
        self.mark_typed(row, col);
        self.counters.made += 1;
        if last_column {
            self.new_epoch();
            self.newline(now, carrier, server);
        } else {
            self.move_cursor(row, col + 1, carrier);
        }
    }

    fn delete(&mut self, now: Instant, carrier: StateNum, server: &Framebuffer) {
        let (row, col) = self.cursor(server);
        let width = server.width;
        if col == 0 || row >= server.height || col > width {
            return;
        }
        let at = col - 1;
        if self.config.overwrite {
            let bg = server.cell(pos(row, at)).map_or(Color::Default, |c| c.renditions.bg);
            self.place(now, row, at, Some(Cell::blank(bg)), carrier, server);
            self.mark_typed(row, at);
        } else {
            // The text after the cursor moves left, up to the first gap of two blanks (what lies
            // beyond, a right prompt, stays: as for an insert).
            let end = self.text_run_end(row, col, server);
            for i in at..end.max(col) {
                let content = if i + 2 >= width { None } else { self.value(row, i + 1, server) };
                self.place(now, row, i, content, carrier, server);
                self.mark_shifted(row, i);
            }
            let epoch = self.epoch;
            self.ops.push(RowOp { row, col: at, carrier, epoch, insert: None });
        }
        self.move_cursor(row, at, carrier);
    }

    /// The cursor goes to the start of the next row; on the bottom row it stays and the row is
    /// predicted blank (never a scroll: mosh issue #6).
    fn newline(&mut self, now: Instant, carrier: StateNum, server: &Framebuffer) {
        let (row, _) = self.cursor(server);
        if row + 1 < server.height {
            self.move_cursor(row + 1, 0, carrier);
        } else {
            for col in 0..server.width {
                self.place(now, row, col, Some(Cell::blank(Color::Default)), carrier, server);
            }
            self.move_cursor(row, 0, carrier);
        }
    }

    fn step(&mut self, delta: isize, carrier: StateNum, server: &Framebuffer) {
        let (row, col) = self.cursor(server);
        let target = col.saturating_add_signed(delta);
        if target < server.width && target != col {
            self.move_cursor(row, target, carrier);
        }
    }

    /// The column an insert at `col` pushes its last cell into: the first blank of two in a row
    /// (or the last column), looking at what the row will hold.
    fn text_run_end(&self, row: usize, col: usize, server: &Framebuffer) -> usize {
        let width = server.width;
        let blank = |i: usize| self.value(row, i, server).is_some_and(|c| c.is_blank());
        (col..width).find(|&i| blank(i) && (i + 1 >= width || blank(i + 1))).unwrap_or(width - 1)
    }

    /// What a cell will hold: its prediction (`None`: unknown), else the server's cell.
    fn value(&self, row: usize, col: usize, server: &Framebuffer) -> Option<Cell> {
        match self.get(row, col) {
            Some(p) => p.content,
            None => server.cell(pos(row, col)).cloned(),
        }
    }

    fn place(
        &mut self,
        now: Instant,
        row: usize,
        col: usize,
        content: Option<Cell>,
        carrier: StateNum,
        server: &Framebuffer,
    ) {
        let width = server.width;
        let real = server.cell(pos(row, col)).map(|c| c.text().to_string()).unwrap_or_default();
        let at = match self.rows.binary_search_by_key(&row, |(r, _)| *r) {
            Ok(at) => at,
            Err(at) => {
                self.rows.insert(at, (row, vec![None; width]));
                at
            }
        };
        let slots = &mut self.rows[at].1;
        if slots.len() < width {
            slots.resize(width, None);
        }
        let original = match slots[col].take() {
            Some(mut old) => {
                old.original.push(old.content.map(|c| c.text().to_string()).unwrap_or_default());
                old.original
            }
            None => vec![real],
        };
        slots[col] = Some(CellPrediction {
            epoch: self.epoch,
            carrier,
            made_at: now,
            content,
            original,
            typed: false,
            shifted: false,
            drawn: false,
        });
    }

    // --- Judging (§5, §6) ------------------------------------------------------------------

    fn row_slots(&self, row: usize) -> Option<&Vec<Option<CellPrediction>>> {
        let at = self.rows.binary_search_by_key(&row, |(r, _)| *r).ok()?;
        Some(&self.rows[at].1)
    }

    fn row_slots_mut(&mut self, row: usize) -> Option<&mut Vec<Option<CellPrediction>>> {
        let at = self.rows.binary_search_by_key(&row, |(r, _)| *r).ok()?;
        Some(&mut self.rows[at].1)
    }

    fn get(&self, row: usize, col: usize) -> Option<&CellPrediction> {
        self.row_slots(row)?.get(col)?.as_ref()
    }

    fn mark_typed(&mut self, row: usize, col: usize) {
        if let Some(p) = self.row_slots_mut(row).and_then(|s| s.get_mut(col)?.as_mut()) {
            p.typed = true;
        }
    }

    fn mark_shifted(&mut self, row: usize, col: usize) {
        if let Some(p) = self.row_slots_mut(row).and_then(|s| s.get_mut(col)?.as_mut()) {
            p.shifted = true;
        }
    }

    fn clear(&mut self, row: usize, col: usize) {
        if let Some(slot) = self.row_slots_mut(row).and_then(|s| s.get_mut(col)) {
            *slot = None;
        }
    }

    fn verdict(
        &mut self,
        now: Instant,
        p: &CellPrediction,
        row: usize,
        col: usize,
        server: &Framebuffer,
        late_ack: StateNum,
    ) -> Verdict {
        let Some(real) = (row < server.height && col < server.width)
            .then(|| server.cell(pos(row, col)))
            .flatten()
        else {
            return Verdict::Wrong;
        };
        let evidence = |c: &Cell| {
            !c.is_blank() && real.text() == c.text() && !p.original.iter().any(|o| o == c.text())
        };
        if late_ack < p.carrier {
            // Beyond mosh: the server frame showing exactly this character where the cell held
            // something else is the same positive evidence the echo ack would wait for, provided
            // everything else predicted for this key and the ones before it matches the frame too
            // (an application that overwrote instead of inserting must not confirm a shifted
            // line before it is judged).
            if (p.typed || self.before_36)
                && p.content.as_ref().is_some_and(evidence)
                && self.frame_agrees(p.carrier, server)
                && self.cursor_agrees(p.carrier, server)
            {
                return Verdict::Correct;
            }
            let age = now.saturating_duration_since(p.made_at);
            if age >= LONG_GLITCH_PENDING {
                self.glitches = self.glitches.max(GLITCH_LONG);
            } else if age >= GLITCH_PENDING {
                self.glitches = self.glitches.max(GLITCH_SHOW);
            }
            return Verdict::Pending;
        }
        match &p.content {
            None => Verdict::Retire,
            Some(c) if c.is_blank() => Verdict::Retire,
            // Only a typed key's own cell is evidence: shifted cells are rebuilt from the frame.
            Some(c)
                if (p.typed || self.before_36)
                    && evidence(c)
                    && self.cursor_agrees(p.carrier, server) =>
            {
                Verdict::Correct
            }
            // The right text without the cursor to match (a prompt drawn over keys typed ahead
            // of it, whose own letter this may be): proves nothing.
            Some(c) if real.text() == c.text() => Verdict::Retire,
            Some(_) => Verdict::Wrong,
        }
    }

    /// Whether `server` shows, in a cell predicted for a key sent after `carrier`, something
    /// new: not blank, not the prediction, not what the cell held when it was predicted.
    fn overdrawn(&self, carrier: StateNum, server: &Framebuffer) -> bool {
        self.rows.iter().any(|&(row, ref slots)| {
            slots.iter().enumerate().any(|(col, slot)| {
                let Some(q) = slot.as_ref().filter(|q| q.carrier > carrier) else { return false };
                let (Some(c), Some(real)) = (&q.content, server.cell(pos(row, col))) else {
                    return false;
                };
                !real.is_blank()
                    && real.text() != c.text()
                    && !q.original.iter().any(|o| o == real.text())
            })
        })
    }

    /// Whether every known prediction carried by `carrier` or earlier matches `server`.
    fn frame_agrees(&self, carrier: StateNum, server: &Framebuffer) -> bool {
        self.rows.iter().all(|&(row, ref slots)| {
            slots.iter().enumerate().all(|(col, slot)| {
                let Some(q) = slot.as_ref().filter(|q| q.carrier <= carrier) else { return true };
                let Some(c) = &q.content else { return true };
                match server.cell(pos(row, col)) {
                    Some(real) if c.is_blank() => real.is_blank(),
                    Some(real) => real.text() == c.text(),
                    None => false,
                }
            })
        })
    }

    /// Whether the server's cursor stands where the keys up to some `k` at or after `carrier`
    /// put it, with every key's own cell up to `k` showing what was typed there: the frame is the
    /// echo of those keys, not something else that happens to share a letter with them (a
    /// `Password: ` prompt drawn over a `P` typed ahead of it leaves the cursor after the prompt,
    /// where no key put it). A cell that matches without this retires unconfirmed.
    fn cursor_agrees(&self, carrier: StateNum, server: &Framebuffer) -> bool {
        self.echoed_through(server).is_some_and(|through| through >= carrier)
    }

    /// The newest carrier whose keys `server` shows echoed: the server's cursor stands where
    /// the keys up to it put it, and every typed cell up to it shows what was typed.
    fn echoed_through(&self, server: &Framebuffer) -> Option<StateNum> {
        let at = (server.cursor_row, server.cursor_col);
        self.cursors
            .iter()
            .filter(|q| q.from_keys && (q.row, q.col) == at && self.typed_agree(q.carrier, server))
            .map(|q| q.carrier)
            .max()
    }

    /// Whether every typed cell carried by `carrier` or earlier shows what was typed.
    fn typed_agree(&self, carrier: StateNum, server: &Framebuffer) -> bool {
        self.rows.iter().all(|&(row, ref slots)| {
            slots.iter().enumerate().all(|(col, slot)| {
                let Some(t) = slot.as_ref().filter(|t| t.typed && t.carrier <= carrier) else {
                    return true;
                };
                match (&t.content, server.cell(pos(row, col))) {
                    (Some(c), Some(real)) if c.is_blank() => real.is_blank(),
                    (Some(c), Some(real)) => real.text() == c.text(),
                    _ => true,
                }
            })
        })
    }

    /// Beyond mosh: the rest of a row moved along by inserts and Backspaces is what the newest
    /// server frame holds there, moved by the keys it does not show yet (those after the ones
    /// it shows echoed, or all not yet covered by the echo ack). Built once from the frame a key
    /// was typed over, a shifted cell kept what that frame had: vim's `~` on an empty line, which
    /// the new line replaces, was pushed right along everything typed on it (wrong for a round
    /// trip at 500 ms).
    fn rebuild_shifts(&mut self, server: &Framebuffer, late_ack: StateNum) {
        if self.ops.is_empty() || self.before_36 {
            return;
        }
        let shown = self.echoed_through(server).map_or(late_ack, |c| c.max(late_ack));
        let width = server.width;
        let mut rows: Vec<usize> = self.ops.iter().map(|o| o.row).collect();
        rows.sort_unstable();
        rows.dedup();
        for row in rows {
            let Some(slots) = self.row_slots(row) else { continue };
            // What the row holds before the keys: the server's cells, except predictions that
            // are not keys' (a bottom row predicted blank by Enter).
            let mut line: Vec<Option<Cell>> = (0..width)
                .map(|col| match slots.get(col).and_then(Option::as_ref) {
                    Some(p) if !p.typed && !p.shifted => p.content,
                    _ => server.cell(pos(row, col)).cloned(),
                })
                .collect();
            for op in self.ops.iter().filter(|o| o.row == row && o.carrier > shown) {
                replay(&mut line, op);
            }
            let Some(slots) = self.row_slots_mut(row) else { continue };
            for (col, slot) in slots.iter_mut().enumerate() {
                if let Some(p) = slot.as_mut().filter(|p| p.shifted) {
                    p.content = line.get(col).copied().flatten();
                }
            }
        }
    }

    /// Beyond mosh: the first key of a tentative epoch typed at a prompt where typing was echoed
    /// before (the shell's prompt, back after a command) confirms the epoch at once, so a new
    /// command line shows from its first key instead of one round trip later. Only with nothing
    /// predicted in flight and the server's cursor where the key goes: the prompt is on the
    /// server's screen now, not still to come. A password prompt (`Password: `, `[sudo] password
    /// for …`) is not a prompt that echoed, so it stays dark; a key typed ahead of any prompt
    /// finds the cursor elsewhere. Digits are masked (a prompt's command number or clock).
    fn at_known_prompt(&mut self, row: usize, col: usize, server: &Framebuffer) {
        let in_flight = self.rows.iter().any(|(_, s)| s.iter().any(Option::is_some));
        if in_flight || (row, col) != (server.cursor_row, server.cursor_col) {
            return;
        }
        let Some(prompt) = prompt_text(server, row, col) else { return };
        if let Some(at) = self.prompts.iter().position(|known| *known == prompt) {
            self.confirmed = self.epoch;
            self.counters.prompt_confirmed += 1;
            // The newest used stays longest (a shell's prompt, over the text a killed epoch
            // restarted at in the middle of a line, which is learned the same way).
            let known = self.prompts.remove(at);
            self.prompts.push(known);
        } else {
            self.candidate = Some((self.epoch, prompt));
        }
    }

    fn correct(
        &mut self,
        now: Instant,
        p: &CellPrediction,
        row: usize,
        col: usize,
        server: &Framebuffer,
    ) {
        self.confirmed = self.confirmed.max(p.epoch);
        self.counters.confirmed += 1;
        if let Some((_, prompt)) = self.candidate.take_if(|(epoch, _)| *epoch == p.epoch) {
            self.prompts.retain(|known| *known != prompt);
            self.prompts.push(prompt);
            if self.prompts.len() > KNOWN_PROMPTS {
                self.prompts.remove(0);
            }
        }
        // Colours from syntax highlighting carry over to what is typed after (§5).
        if let (Some(real), Some(slots)) = (server.cell(pos(row, col)), self.row_slots_mut(row)) {
            for slot in slots.iter_mut().skip(col).flatten() {
                if let Some(c) = slot.content.as_mut() {
                    c.renditions = real.renditions;
                }
            }
        }
        self.clear(row, col);
        let quick = now.saturating_duration_since(p.made_at) < QUICK_CONFIRM;
        let spaced = self
            .last_decay
            .is_none_or(|t| now.saturating_duration_since(t) >= GLITCH_DECAY_SPACING);
        if quick && spaced && self.glitches > 0 {
            self.glitches -= 1;
            self.last_decay = Some(now);
        }
    }

    /// A tentative prediction was wrong: its epoch and every later one go (§5). Typing goes on
    /// from the server's cursor.
    fn kill_epoch(
        &mut self,
        epoch: u64,
        server: &Framebuffer,
        late_ack: StateNum,
        last_sent: StateNum,
    ) {
        for (_, slots) in self.rows.iter_mut() {
            for slot in slots.iter_mut() {
                if slot.as_ref().is_some_and(|p| p.epoch >= epoch) {
                    *slot = None;
                }
            }
        }
        self.cursors.retain(|c| c.epoch < epoch);
        self.ops.retain(|o| o.epoch < epoch);
        // With keys still in flight the server's cursor has yet to move for them: judge this
        // restart once they are acknowledged (a wrong guess resets, and the next keys predict
        // from where the server really is), not only after the next key's echo, which left a
        // line dark for a whole round trip at 500 ms.
        let carrier = if last_sent > late_ack { last_sent } else { StateNum(last_sent.0 + 1) };
        self.cursors.push(CursorPrediction {
            row: server.cursor_row,
            col: server.cursor_col,
            epoch: self.epoch,
            carrier,
            from_keys: false,
        });
        self.counters.epochs_killed += 1;
        self.new_epoch();
    }

    /// Only the newest cursor prediction is checked, once acknowledged; it never confirms (§5).
    fn judge_cursor(&mut self, server: &Framebuffer, late_ack: StateNum) {
        if let Some(c) = self.cursors.last().copied() {
            let due = late_ack >= c.carrier;
            let wrong = (c.row, c.col) != (server.cursor_row, server.cursor_col);
            if due && wrong {
                if self.config.mode == PredictMode::Experimental {
                    self.cursors.clear();
                } else {
                    self.reset();
                }
                return;
            }
        }
        self.cursors.retain(|c| late_ack < c.carrier);
    }

    fn update_triggers(&mut self, send_interval: Duration) {
        if send_interval > SHOW_ON {
            self.srtt_trigger = true;
        } else if send_interval <= SHOW_OFF && !self.outstanding() {
            self.srtt_trigger = false;
        }
        if send_interval > FLAG_ON {
            self.flagging = true;
        } else if send_interval <= FLAG_OFF {
            self.flagging = false;
        }
    }

    fn check_size(&mut self, server: &Framebuffer) {
        let size = server.size();
        if self.size.is_some_and(|s| s != size) {
            self.reset();
        }
        self.size = Some(size);
    }
}

/// The text left of `col` on `row`, digit runs as `#`; `None` when too short to be a prompt.
fn prompt_text(server: &Framebuffer, row: usize, col: usize) -> Option<String> {
    let mut text = String::new();
    let mut shown = 0;
    for c in 0..col {
        let cell = server.cell(pos(row, c))?;
        let t = cell.text();
        if t.chars().all(|ch| ch.is_ascii_digit()) && !t.is_empty() {
            if !text.ends_with('#') {
                text.push('#');
            }
        } else {
            text.push_str(if t.is_empty() { " " } else { t });
        }
        shown += usize::from(!cell.is_blank());
    }
    (shown >= MIN_PROMPT).then_some(text)
}

/// One key replayed on a row (`None`: content unknown), as `print` and `delete` predict it.
fn replay(line: &mut [Option<Cell>], op: &RowOp) {
    let width = line.len();
    let blank = |line: &[Option<Cell>], i: usize| {
        line.get(i).is_some_and(|c| c.is_some_and(|c| c.is_blank()))
    };
    let run_end = |line: &[Option<Cell>], from: usize| {
        (from..width)
            .find(|&i| blank(line, i) && (i + 1 >= width || blank(line, i + 1)))
            .unwrap_or(width - 1)
    };
    if op.col >= width {
        return;
    }
    match op.insert {
        Some(cell) => {
            let end = run_end(line, op.col);
            for i in (op.col + 1..=end).rev() {
                line[i] = if i + 1 == width { None } else { line[i - 1] };
            }
            line[op.col] = Some(cell);
        }
        None => {
            let cursor = op.col + 1;
            let end = run_end(line, cursor);
            for i in op.col..end.max(cursor).min(width) {
                line[i] = if i + 2 >= width { None } else { line.get(i + 1).copied().flatten() };
            }
        }
    }
}

fn pos(row: usize, col: usize) -> Pos {
    Pos { row: u16::try_from(row).unwrap_or(u16::MAX), col: u16::try_from(col).unwrap_or(u16::MAX) }
}
