// The bell and the title, so that a person learns a long job or an agent needs them: the bell
// flashes the terminal; while the tab is hidden it also puts a marker before the tab's title, until
// the tab is seen again, and raises a browser notification when the settings allow it.

export const BELL_MARK = '🔔 ';

export function wireBell({ settings }) {
  let title = 'tern';
  let rang = false;
  let note = null;
  const show = () => {
    document.title = (rang ? BELL_MARK : '') + title;
  };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState !== 'visible') return;
    rang = false;
    note?.close();
    note = null;
    show();
  });
  return {
    title(text) {
      title = text ? `${text} — tern` : 'tern';
      show();
    },
    bell() {
      document.body.classList.remove('bell');
      void document.body.offsetWidth; // restart the flash's animation
      document.body.classList.add('bell');
      if (document.visibilityState === 'visible') return;
      rang = true;
      show();
      if (settings().notifications && 'Notification' in window && Notification.permission === 'granted') {
        note?.close();
        note = null;
        try {
          const shown = new Notification(title, { body: 'The terminal rang its bell.', tag: 'tern-bell' });
          shown.onclick = () => {
            window.focus();
            shown.close();
          };
          note = shown;
        } catch (e) {
          // Chrome on Android has the constructor but throws ("Illegal constructor": only a service
          // worker may show one there); the title's mark stays.
          console.warn(`bell: no notification (${e})`);
        }
      }
    },
  };
}
