// What the shell sends to the browser: `tern open URL` waits here for the person's click (a page
// opens nothing by itself: popup blockers are right), and `tern send FILE`, once the page has it
// all and its SHA-256 matches, is saved as a download. The progress is in mosh's bar, drawn by
// the client; the answers go back to the shell, which says what happened.

export function wireOffers({ $, client, term }) {
  const box = $('open-offer');
  const waiting = []; // [{ id, url }], shown one at a time, oldest first
  const show = () => {
    const next = waiting[0];
    box.hidden = !next;
    if (!next) return;
    $('open-offer-url').textContent = next.url;
    $('open-offer-url').title = next.url;
    $('open-offer-more').textContent = waiting.length > 1 ? `(+${waiting.length - 1} more)` : '';
  };
  const answer = (opened) => {
    const offer = waiting.shift();
    if (!offer) return;
    if (opened) window.open(offer.url, '_blank', 'noopener,noreferrer');
    client().answerOffer(offer.id, opened);
    show();
    term.focus();
  };
  $('open-offer-open').addEventListener('click', () => answer(true));
  $('open-offer-dismiss').addEventListener('click', () => answer(false));
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') answer(false);
  });

  return {
    offerUrl(id, url) {
      if (waiting.some((o) => o.id === id)) return; // offered again after a reconnect
      waiting.push({ id, url });
      show();
    },
    saveFile(name, blob) {
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = name;
      a.rel = 'noopener';
      document.body.append(a);
      a.click();
      a.remove();
      // The browser has copied it into its download by then; a minute is ample.
      setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
    },
  };
}
