//! The renderer adapter: the core's frame (server screen plus notification bar) into xterm.js,
//! as the difference to what xterm.js already shows, with the rows that scrolled off the server's
//! screen pushed into xterm.js's scrollback first (`tern::terminal::push_rows`).

use tern::terminal::{
    Framebuffer, Notification, Renderer, Size, overlay_notification, push_rows, rows_scrolled_off,
};

/// What xterm.js shows.
#[derive(Debug, Default)]
pub struct Screen {
    /// What xterm.js shows, as the renderer left it; `None` when unknown (start, after a resize).
    shown: Option<Framebuffer>,
    /// The server's screen at the last draw (without predictions or the bar): where scrolling
    /// is measured from.
    server: Option<Framebuffer>,
    /// Rows pushed into xterm.js's scrollback so far (tests read it through the stats).
    pub scrollback_rows: u64,
}

impl Screen {
    /// xterm.js's content is unknown (it reflowed on a resize, or a new session starts): the
    /// next draw repaints everything.
    pub fn forget(&mut self) {
        self.shown = None;
        self.server = None;
    }

    /// The bytes that make xterm.js show `frame` (the server's screen `server` with predictions)
    /// with the notification bar (empty when it already does).
    /// `size` is xterm.js's: a frame of another size (the server has not answered a resize yet)
    /// is drawn cut or padded to it.
    pub fn draw(
        &mut self,
        server: &Framebuffer,
        frame: &Framebuffer,
        note: &Notification<'_>,
        size: Size,
    ) -> Vec<u8> {
        let mut bytes = Vec::new();
        if let (Some(before), Some(shown)) = (&self.server, &mut self.shown) {
            // Rows of another width than xterm.js's (a resize under way) are not pushed.
            let gone = if server.size() == size { rows_scrolled_off(before, server) } else { 0 };
            if gone > 0 {
                bytes = push_rows(shown, &before.rows()[..gone]);
                self.scrollback_rows += gone as u64;
            }
        }
        let wanted = overlay_notification(&frame.fitted(size), note);
        bytes.extend(Renderer::in_place().render(self.shown.as_ref(), &wanted));
        self.shown = Some(wanted);
        self.server = Some(server.clone());
        bytes
    }
}
