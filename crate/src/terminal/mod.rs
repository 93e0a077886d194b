//! The server's terminal as the client keeps it: framebuffer, mosh's emulator, and the renderer.
//!
//! ```text
//!  HostBytes ──> Emulator (parser + mosh semantics) ──> Framebuffer (rows shared via Arc)
//!                                                            │
//!  Complete = Framebuffer + echo_ack: the SyncState the transport keeps per server state
//!                                                            │
//!  Renderer: (frame shown, frame wanted) ──> escape bytes for xterm.js (mosh's Display::new_frame)
//! ```
//!
//! What it does not do: answer terminal queries, keep scrollback or an alternate screen (mosh
//! has neither), or reflow text on resize.

mod cell;
mod changes;
mod complete;
mod display;
mod emulator;
mod framebuffer;
mod history;
mod history_html;
mod mosh_sgr;
mod notify;
mod parser;
mod scrollback;
mod search;
mod text;
pub mod width;

pub use cell::{Attrs, Cell, Color, Grapheme, MAX_GRAPHEME_BYTES, Renditions};
pub use changes::{Changes, SideEffects, decode_clipboard};
pub use complete::{Complete, MAX_CELLS};
pub use display::Renderer;
pub use emulator::Emulator;
pub use framebuffer::{Framebuffer, Modes, MouseEncoding, MouseReporting, Pos, Row, Size};
pub use history::{HistoryLines, MAX_HISTORY_LINE_BYTES, cut_mark, plain};
pub use history_html::{line_html, line_image_markers};
pub use notify::{Notification, join_messages, overlay_notification};
pub use scrollback::{push_rows, rows_scrolled_off};
pub use search::{QueryError, SearchQuery};
pub use text::{ScreenText, screen_text};
