//! The renderer adapter: the core's frame (server screen plus notification bar) into xterm.js,
//! as the difference to what xterm.js already shows.

use tern::terminal::{
    Changes, Framebuffer, Notification, Renderer, SideEffects, overlay_notification,
};

/// What xterm.js shows and which side effects were reported.
#[derive(Debug, Default)]
pub struct Screen {
    /// What xterm.js shows, as the renderer left it; `None` when unknown (start, after a resize).
    shown: Option<Framebuffer>,
    side_effects: SideEffects,
}

impl Screen {
    /// xterm.js's content is unknown (it reflowed on a resize, or a new session starts): the
    /// next draw repaints everything.
    pub fn forget(&mut self) {
        self.shown = None;
    }

    /// The bytes that make xterm.js show `fb` with the notification bar (empty when it already
    /// does), and the side effects (title, bell, clipboard) new since the last draw.
    pub fn draw(&mut self, fb: &Framebuffer, note: &Notification<'_>) -> (Vec<u8>, Changes) {
        let wanted = overlay_notification(fb, note);
        let bytes = Renderer::new().render(self.shown.as_ref(), &wanted);
        self.shown = Some(wanted);
        (bytes, self.side_effects.observe(fb))
    }
}
