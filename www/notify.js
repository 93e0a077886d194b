// Notifications programs ask for (OSC 9, OSC 777 notify; coding agents use them to say they wait
// for the person): mosh-server drops them, the recorder lifts them out and the relay sends them
// here (docs/IMAGES.md, "Clipboard and notifications"). Shown as a browser notification only when
// the setting "Programs may notify me" is "When the tab is hidden", the browser allows it, and the
// tab is hidden: a person looking at the terminal needs no second word, and a program must not
// reach the desktop unless the person said so. The relay paces them (3 at once, then one per 2 s).

export function wireProgramNotifications({ settings }) {
  let note = null;
  // For tests (window.tern.programNotes): how many came, how many were shown.
  const count = { received: 0, shown: 0 };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState !== 'visible') return;
    note?.close();
    note = null;
  });
  return {
    count,
    notify(title, body) {
      count.received += 1;
      if (settings().programNotify !== 'hidden') return;
      if (document.visibilityState === 'visible') return;
      if (!('Notification' in window) || Notification.permission !== 'granted') return;
      try {
        // One at a time (tag): the newest replaces the last, so a chatty program leaves one.
        const shown = new Notification(title || 'tern', { body, tag: 'tern-program' });
        shown.onclick = () => {
          window.focus();
          shown.close();
        };
        note = shown;
        count.shown += 1;
      } catch (e) {
        // Chrome on Android: only a service worker may show one there.
        console.warn(`notify: no notification (${e})`);
      }
    },
  };
}
