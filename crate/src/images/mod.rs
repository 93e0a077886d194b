//! Images lifted out of a pty's output, for the recorder (`tern-relay record`): mosh-server's
//! emulator drops SIXEL, iTerm2 inline images and kitty graphics, so the recorder takes them out
//! of the stream before mosh-server sees it, keeps them beside the history, and puts in their
//! place what keeps the text where a terminal with images would have it.
//!
//! ```text
//!  pty output ──▶ Lifter::feed (any chunks) ──▶ Piece::Text   bytes that are not an image, as they came
//!                                          ├──▶ Piece::Image  the image, its size in pixels and cells,
//!                                          │                  and layout_bytes(): the cursor moves it makes
//!                                          ├──▶ Piece::Signal  an OSC 52 / 9 / 777 mosh-server drops (signal.rs)
//!                                          └──▶ Piece::Dropped an image that was too large, malformed,
//!                                                             truncated or of a kind not lifted, and why
//! ```
//!
//! Sans-IO: the caller writes the text and the layout bytes on (to mosh-server and to its own
//! emulator) and reads the image's position off that emulator ([`anchor`]) when the image comes.
//! Memory is bounded whatever comes: one image's encoded bytes are at most
//! [`LifterConfig::max_image_bytes`] (the rest of a larger one is counted, not kept), and the
//! prefix that decides whether a sequence is an image is a few dozen bytes.

mod anchor;
mod cells;
pub mod convert;
mod iterm;
mod kitty;
mod lifter;
pub mod marker;
mod probe;
pub mod signal;
mod sixel;

pub use anchor::{Anchor, anchor};
pub use cells::{CursorAfter, DEFAULT_CELL_HEIGHT, DEFAULT_CELL_WIDTH, Geometry};
pub use lifter::Lifter;
pub use probe::pixel_size;
pub use signal::{NotifyLimit, Signal, link_start, link_text};

/// Most encoded bytes one image may have by default (base64 or SIXEL as it came).
pub const DEFAULT_MAX_IMAGE_BYTES: usize = 16 << 20;

/// How images are lifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifterConfig {
    /// Most encoded bytes per image; a larger one is dropped ([`DropReason::TooLarge`]).
    pub max_image_bytes: usize,
    /// The terminal's size in cells and a cell's size in pixels.
    pub geometry: Geometry,
}

impl Default for LifterConfig {
    fn default() -> Self {
        LifterConfig { max_image_bytes: DEFAULT_MAX_IMAGE_BYTES, geometry: Geometry::default() }
    }
}

/// Which escape sequence carried an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// DCS P1;P2;P3 q … ST.
    Sixel,
    /// OSC 1337 ; File=… : base64 BEL/ST (and MultipartFile / FilePart / FileEnd).
    Iterm,
    /// APC G keys ; base64 ST.
    Kitty,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Sixel => "sixel",
            Protocol::Iterm => "iterm",
            Protocol::Kitty => "kitty",
        }
    }
}

/// What an image's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Gif,
    Webp,
    /// chafa's iTerm2 output is a TIFF (browsers do not draw it: a server converts it).
    Tiff,
    /// The whole DCS sequence (ESC P params q data ESC \), as a terminal would read it.
    Sixel,
    /// kitty f=24: width × height × 3 bytes.
    Rgb,
    /// kitty f=32: width × height × 4 bytes.
    Rgba,
}

impl ImageFormat {
    /// Its name in the store's index, also the file extension.
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpeg",
            ImageFormat::Gif => "gif",
            ImageFormat::Webp => "webp",
            ImageFormat::Tiff => "tiff",
            ImageFormat::Sixel => "sixel",
            ImageFormat::Rgb => "rgb",
            ImageFormat::Rgba => "rgba",
        }
    }
}

/// An image taken out of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiftedImage {
    pub protocol: Protocol,
    pub format: ImageFormat,
    /// Decoded bytes (SIXEL: the sequence as it came, ST normalised to ESC \).
    pub data: Vec<u8>,
    /// Size in pixels.
    pub width: u32,
    pub height: u32,
    /// Size in cells, as the terminal would draw it.
    pub cols: u16,
    pub rows: u16,
    /// Where the cursor goes after it.
    pub cursor: CursorAfter,
    /// The file name the program gave (iTerm2 name=), if any.
    pub name: Option<String>,
}

impl LiftedImage {
    /// What stands in for the image in the stream: the cursor moves the image makes.
    pub fn layout_bytes(&self) -> Vec<u8> {
        cells::layout_bytes(self.rows, self.cols, self.cursor)
    }
}

/// Why an image was not lifted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// More encoded bytes than the cap.
    TooLarge { cap: usize },
    /// A new escape sequence (or CAN / SUB) began before the image's end.
    Interrupted,
    /// The stream ended in the middle of the image.
    Ended,
    /// Its bytes are not what the sequence says.
    Malformed(&'static str),
    /// A kind of image or transmission not lifted (a file path, a download, an unknown format).
    Unsupported(&'static str),
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DropReason::TooLarge { cap } => write!(f, "over the limit of {cap} bytes"),
            DropReason::Interrupted => f.write_str("truncated: another escape sequence began"),
            DropReason::Ended => f.write_str("truncated: the output ended"),
            DropReason::Malformed(why) => write!(f, "malformed: {why}"),
            DropReason::Unsupported(what) => write!(f, "not supported: {what}"),
        }
    }
}

/// An image that was dropped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub protocol: Protocol,
    pub reason: DropReason,
    /// Encoded bytes it had when dropped.
    pub bytes: u64,
}

/// What [`Lifter::feed`] hands on, in stream order.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Bytes that are not an image, unchanged.
    Text(&'a [u8]),
    Image(LiftedImage),
    Dropped(Dropped),
    /// A clipboard write or notification mosh-server would drop ([`signal`]).
    Signal(Signal),
}

#[cfg(test)]
mod tests;
