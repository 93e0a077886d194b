//! `stats()`: the core's figures as the JS object tests and benchmarks read (docs/BROWSER.md).

use std::time::Duration;

use tern::page::{PageClient, PageCost};
use tern::paste::PasteQueue;
use tern::predict::{PredictConfig, Predictor};
use tern::session::{ClientSession, DrawPacer, EchoSummary};
use tern::terminal::Complete;
use tern::time::Instant;
use wasm_bindgen::JsValue;

use crate::hooks::object;

fn num(v: impl Into<f64>) -> JsValue {
    JsValue::from(v.into())
}

fn big(v: u64) -> JsValue {
    JsValue::from(v as f64)
}

fn opt_ms(d: Option<Duration>) -> JsValue {
    d.map_or(JsValue::NULL, |d| JsValue::from(d.as_secs_f64() * 1000.0))
}

fn opt_str(s: Option<&str>) -> JsValue {
    s.map_or(JsValue::NULL, JsValue::from)
}

/// A moment on the page's clock as `performance.now()` milliseconds.
fn at_ms(at: Option<Instant>) -> JsValue {
    at.map_or(JsValue::NULL, |t| JsValue::from(t.as_micros() as f64 / 1000.0))
}

/// `stats()`: the page client's counters and figures (`control_chunks`: read on the current
/// link's control stream).
pub fn page(client: &PageClient, control_chunks: u64, now: Instant) -> JsValue {
    let c = client.counters();
    let m = client.milestones();
    let session = client.session();
    object(&[
        ("phase", client.status().phase().into()),
        ("session", opt_str(client.session_id())),
        ("infoRequests", c.info_requests.into()),
        ("sessionListRequests", c.session_list_requests.into()),
        ("connects", c.connects.into()),
        ("readies", c.readies.into()),
        ("linkDatagramsIn", big(c.datagrams_in)),
        ("linkDatagramsOut", big(c.datagrams_out)),
        ("droppedOffline", big(c.dropped_offline)),
        ("framingErrors", big(c.framing_errors)),
        ("heldBatches", big(c.held_batches)),
        ("heldDatagrams", big(c.held_datagrams)),
        ("controlChunks", big(control_chunks)),
        ("pushedChallenges", big(crate::relay_link::pushed_challenges())),
        ("transport", opt_str(client.link_kind())),
        ("websocketLinks", c.websocket_links.into()),
        ("joinerEvicted", big(client.joiner_evicted())),
        ("firstReadyMs", at_ms(m.first_ready)),
        ("firstFrameMs", at_ms(m.first_frame)),
        ("restoredMs", at_ms(m.restored)),
        ("firstConnectMs", at_ms(m.first_connect)),
        ("liveMs", at_ms(m.live)),
        ("lastError", opt_str(client.last_error())),
        ("core", session.map_or(JsValue::NULL, core)),
        ("echo", echo(&client.echo().summary())),
        ("predict", predict(client.predict(), session.map(|s| s.predictor()))),
        ("paste", paste(client.pastes(), now)),
        ("download", client.downloads().progress(now).map_or(JsValue::NULL, |p| download(&p))),
        ("scrollbackRows", big(client.scrollback_rows())),
        ("xtermWrites", big(client.terminal_writes())),
        ("draws", pacer(client.pacer(), now)),
        ("cost", frame_cost(client.cost())),
    ])
}

/// `stats().echo`.
/// One row of the relay's session list (`Client.listSessions`).
pub fn session_summary(s: &tern::relay_proto::SessionSummary) -> JsValue {
    object(&[
        ("id", s.id.as_str().into()),
        ("created", big(s.created)),
        ("lastActive", big(s.last_active)),
        ("cols", num(s.cols)),
        ("rows", num(s.rows)),
        ("title", s.title.as_str().into()),
        ("attached", s.attached.into()),
        ("host", s.host.as_str().into()),
    ])
}

/// The relay's session list (`Client.listSessions`).
pub fn session_list(list: &tern::relay_proto::SessionList) -> JsValue {
    let sessions: js_sys::Array = list.sessions.iter().map(session_summary).collect();
    let hosts: js_sys::Array = list.ssh_hosts.iter().map(|h| JsValue::from(h.as_str())).collect();
    object(&[("sessions", sessions.into()), ("sshHosts", hosts.into())])
}

pub fn echo(s: &EchoSummary) -> JsValue {
    let samples: js_sys::Array =
        s.samples.iter().map(|d| JsValue::from(d.as_secs_f64() * 1000.0)).collect();
    object(&[
        ("count", big(s.count as u64)),
        ("pending", big(s.pending as u64)),
        ("minMs", opt_ms(s.min)),
        ("medianMs", opt_ms(s.median)),
        ("p90Ms", opt_ms(s.p90)),
        ("maxMs", opt_ms(s.max)),
        ("meanMs", opt_ms(s.mean)),
        ("samplesMs", samples.into()),
    ])
}

/// `stats().core`: the session's transport counters.
pub fn core(s: &ClientSession<Complete>) -> JsValue {
    let k = s.counters();
    object(&[
        ("datagramsIn", big(k.datagrams_in)),
        ("datagramsOut", big(k.datagrams_out)),
        ("bytesIn", big(k.bytes_in)),
        ("bytesOut", big(k.bytes_out)),
        ("authFailures", big(k.auth_failures)),
        ("malformed", big(k.malformed)),
        ("retransmits", big(k.retransmits)),
        ("applied", big(k.applied)),
        ("droppedUnknownBase", big(k.dropped_unknown_base)),
        ("applyFailures", big(k.apply_failures)),
        ("srttMs", num(s.srtt().as_secs_f64() * 1000.0)),
        ("unackedInput", big(s.unacked_input() as u64)),
        ("serverState", big(s.server_state_num().0)),
    ])
}

/// `stats().draws`: how the pacer drew (at once, at animation frames, coalesced).
pub fn pacer(p: &DrawPacer, now: Instant) -> JsValue {
    let c = p.counters();
    object(&[
        ("visible", p.is_visible().into()),
        ("requests", big(c.requests)),
        ("draws", big(c.draws)),
        ("immediate", big(c.immediate)),
        ("coalesced", big(c.coalesced)),
        ("floodSkips", big(c.flood_skips)),
        ("flooding", p.flooding(now).into()),
    ])
}

/// `stats().cost`: the page's time per step, totals in ms since it started.
pub fn frame_cost(c: &PageCost) -> JsValue {
    object(&[
        ("datagrams", big(c.datagrams)),
        ("decryptMs", num(c.decrypt_ms)),
        ("inflateMs", num(c.inflate_ms)),
        ("applyMs", num(c.apply_ms)),
        ("diffMs", num(c.diff_ms)),
        ("writeMs", num(c.write_ms)),
        ("bytesWritten", big(c.bytes_written)),
    ])
}

/// `stats().predict`: the mode and what the predictor did.
pub fn predict(config: PredictConfig, predictor: Option<&Predictor>) -> JsValue {
    let c = predictor.map(|p| p.counters().clone()).unwrap_or_default();
    object(&[
        ("mode", config.mode.as_str().into()),
        ("overwrite", config.overwrite.into()),
        ("showing", predictor.is_some_and(Predictor::showing).into()),
        ("flagging", predictor.is_some_and(Predictor::flagging).into()),
        ("made", big(c.made)),
        ("drawn", big(c.drawn)),
        ("confirmed", big(c.confirmed)),
        ("wrongDrawn", big(c.wrong_drawn)),
        ("epochsKilled", big(c.epochs_killed)),
        ("resets", big(c.resets)),
        ("promptConfirmed", big(c.prompt_confirmed)),
    ])
}

/// `stats().paste`.
pub fn paste(q: &PasteQueue, now: Instant) -> JsValue {
    let c = q.counters();
    let progress = upload_progress(q, now);
    object(&[
        ("pastes", num(c.pastes)),
        ("uploadsStarted", num(c.uploads)),
        ("streams", num(c.streams)),
        ("uploadBytesSent", big(c.bytes_sent)),
        ("bytesSkipped", big(c.bytes_skipped)),
        ("completed", num(c.completed)),
        ("failed", num(c.failed)),
        ("cancelled", num(c.cancelled)),
        ("pathsTyped", num(c.paths_typed)),
        ("heldKeys", big(c.held_keys)),
        ("active", q.busy().into()),
        ("line", opt_str(q.line(now).as_deref())),
        ("lastPath", opt_str(q.last_path.as_deref())),
        ("lastError", opt_str(q.last_error.as_deref())),
        ("lastUploadMs", opt_ms(q.last_upload_time)),
        ("lastFirstByteWaitMs", opt_ms(q.last_first_byte_wait)),
        ("lastReadMs", opt_ms(q.last_read_time)),
        ("eager", q.eager.into()),
        ("queueTargetMs", opt_ms(q.queue_target)),
        ("progress", progress),
        ("holdKeys", q.hold_keys.into()),
    ])
}

/// The pacer's figures of the upload on the wire.
fn upload_progress(q: &PasteQueue, now: Instant) -> JsValue {
    let Some(u) = q.active_job().and_then(|j| j.upload()) else { return JsValue::NULL };
    let p = u.progress(now);
    object(&[
        ("percent", p.percent.into()),
        ("acked", big(p.acked)),
        ("total", big(p.total)),
        ("inFlight", big(p.in_flight)),
        ("window", big(p.window)),
        ("rate", p.rate.map_or(JsValue::NULL, big)),
        ("pacingRate", p.pacing_rate.map_or(JsValue::NULL, big)),
        ("queueMs", opt_ms(p.standing_queue)),
        ("minRttMs", opt_ms(p.min_rtt)),
    ])
}

/// `{ name, state, bytesDone, total, percent, rate, queued, line }` of the download in front.
pub fn download(p: &tern::download::DownloadProgress) -> JsValue {
    object(&[
        ("name", p.name.as_str().into()),
        ("state", p.state.as_str().into()),
        ("bytesDone", (p.bytes_done as f64).into()),
        ("total", (p.total as f64).into()),
        ("percent", p.percent().into()),
        ("rate", p.rate.map_or(JsValue::NULL, |r| (r as f64).into())),
        ("queued", (p.queued as f64).into()),
        ("line", p.line().into()),
    ])
}
