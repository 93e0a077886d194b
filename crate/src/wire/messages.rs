//! Conversion between protobuf bytes and Tern's types: instructions, user and host diffs.

use prost::Message as _;

use super::proto;
use super::{HostEvent, Instruction, StateNum, UserEvent, WireError};

/// `MOSH_PROTOCOL_VERSION`: written into every instruction, required of every received one.
pub const PROTOCOL_VERSION: u32 = 2;

/// Serializes an instruction with all seven fields in field order, like the stock sender
/// (MOSH-PROTOCOL.md 5.1), `protocol_version` = 2.
pub fn encode_instruction(instruction: &Instruction) -> Vec<u8> {
    proto::TransportInstruction {
        protocol_version: Some(PROTOCOL_VERSION),
        old_num: Some(instruction.old_num.0),
        new_num: Some(instruction.new_num.0),
        ack_num: Some(instruction.ack_num.0),
        throwaway_num: Some(instruction.throwaway_num.0),
        diff: Some(instruction.diff.clone()),
        chaff: Some(instruction.chaff.clone()),
    }
    .encode_to_vec()
}

/// Parses a serialized instruction; absent fields read as 0 / empty, and a `protocol_version`
/// other than 2 (absent included) is refused.
pub fn decode_instruction(bytes: &[u8]) -> Result<Instruction, WireError> {
    let message = proto::TransportInstruction::decode(bytes).map_err(|e| {
        WireError::ProtobufDecode { message: "TransportBuffers.Instruction", reason: e.to_string() }
    })?;
    let version = message.protocol_version.unwrap_or(0);
    if version != PROTOCOL_VERSION {
        return Err(WireError::ProtocolVersionMismatch { got: version });
    }
    Ok(Instruction {
        old_num: StateNum(message.old_num.unwrap_or(0)),
        new_num: StateNum(message.new_num.unwrap_or(0)),
        ack_num: StateNum(message.ack_num.unwrap_or(0)),
        throwaway_num: StateNum(message.throwaway_num.unwrap_or(0)),
        diff: message.diff.unwrap_or_default(),
        chaff: message.chaff.unwrap_or_default(),
    })
}

fn resize_message(cols: u16, rows: u16) -> proto::ResizeMessage {
    proto::ResizeMessage { width: Some(i32::from(cols)), height: Some(i32::from(rows)) }
}

/// Absent width or height reads as 0 (proto2 default); negative or above `u16::MAX` is refused.
fn resize_size(message: &proto::ResizeMessage) -> Result<(u16, u16), WireError> {
    let width = message.width.unwrap_or(0);
    let height = message.height.unwrap_or(0);
    match (u16::try_from(width), u16::try_from(height)) {
        (Ok(cols), Ok(rows)) => Ok((cols, rows)),
        _ => Err(WireError::ResizeOutOfRange { width, height }),
    }
}

/// A client diff: runs of consecutive [`UserEvent::Keys`] merge into one Keystroke instruction (as
/// mosh does); each Resize is its own instruction. Empty key runs are left out.
pub fn encode_user_message(events: &[UserEvent]) -> Vec<u8> {
    let mut instructions = Vec::new();
    let mut keys: Vec<u8> = Vec::new();
    let flush_keys = |keys: &mut Vec<u8>, instructions: &mut Vec<proto::UserInstruction>| {
        if !keys.is_empty() {
            instructions.push(proto::UserInstruction {
                keystroke: Some(proto::Keystroke { keys: Some(std::mem::take(keys)) }),
                resize: None,
            });
        }
    };
    for event in events {
        match event {
            UserEvent::Keys(bytes) => keys.extend_from_slice(bytes),
            UserEvent::Resize { cols, rows } => {
                flush_keys(&mut keys, &mut instructions);
                instructions.push(proto::UserInstruction {
                    keystroke: None,
                    resize: Some(resize_message(*cols, *rows)),
                });
            }
        }
    }
    flush_keys(&mut keys, &mut instructions);
    proto::UserMessage { instruction: instructions }.encode_to_vec()
}

/// Parses a client diff. Instructions with no known extension are skipped; of several extensions
/// on one instruction (mosh never sends that) the lowest-numbered wins.
pub fn decode_user_message(diff: &[u8]) -> Result<Vec<UserEvent>, WireError> {
    let message = proto::UserMessage::decode(diff).map_err(|e| WireError::ProtobufDecode {
        message: "ClientBuffers.UserMessage",
        reason: e.to_string(),
    })?;
    let mut events = Vec::with_capacity(message.instruction.len());
    for instruction in message.instruction {
        if let Some(keystroke) = instruction.keystroke {
            events.push(UserEvent::Keys(keystroke.keys.unwrap_or_default()));
        } else if let Some(resize) = &instruction.resize {
            let (cols, rows) = resize_size(resize)?;
            events.push(UserEvent::Resize { cols, rows });
        }
    }
    Ok(events)
}

/// A server diff: one instruction per event, in the given order.
pub fn encode_host_message(events: &[HostEvent]) -> Vec<u8> {
    let instruction = events
        .iter()
        .map(|event| {
            let mut out = proto::HostInstruction { hostbytes: None, resize: None, echoack: None };
            match event {
                HostEvent::Bytes(bytes) => {
                    out.hostbytes = Some(proto::HostBytes { hoststring: Some(bytes.clone()) });
                }
                HostEvent::Resize { cols, rows } => out.resize = Some(resize_message(*cols, *rows)),
                HostEvent::EchoAck(num) => {
                    out.echoack = Some(proto::EchoAck { echo_ack_num: Some(num.0) })
                }
            }
            out
        })
        .collect();
    proto::HostMessage { instruction }.encode_to_vec()
}

/// Parses a server diff. Instructions with no known extension are skipped; of several extensions
/// on one instruction (mosh never sends that) the lowest-numbered wins.
pub fn decode_host_message(diff: &[u8]) -> Result<Vec<HostEvent>, WireError> {
    let message = proto::HostMessage::decode(diff).map_err(|e| WireError::ProtobufDecode {
        message: "HostBuffers.HostMessage",
        reason: e.to_string(),
    })?;
    let mut events = Vec::with_capacity(message.instruction.len());
    for instruction in message.instruction {
        if let Some(bytes) = instruction.hostbytes {
            events.push(HostEvent::Bytes(bytes.hoststring.unwrap_or_default()));
        } else if let Some(resize) = &instruction.resize {
            let (cols, rows) = resize_size(resize)?;
            events.push(HostEvent::Resize { cols, rows });
        } else if let Some(ack) = instruction.echoack {
            events.push(HostEvent::EchoAck(StateNum(ack.echo_ack_num.unwrap_or(0))));
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_extensions_are_skipped() {
        // HostMessage{ Instruction{ field 9 = varint 1 }, Instruction{ echoack 3 } }
        let diff = hex::decode("0a0248010a043a024003").unwrap();
        assert_eq!(decode_host_message(&diff).unwrap(), vec![HostEvent::EchoAck(StateNum(3))]);
        let diff = hex::decode("0a0248010a061a04285030180a00").unwrap();
        assert_eq!(
            decode_user_message(&diff).unwrap(),
            vec![UserEvent::Resize { cols: 80, rows: 24 }]
        );
    }

    #[test]
    fn out_of_range_resizes_are_refused() {
        // width -1 (10-byte varint), height 24
        let mut inner = vec![0x28];
        inner.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        inner.extend_from_slice(&[0x30, 0x18]);
        let mut instruction = vec![0x1a, inner.len() as u8];
        instruction.extend_from_slice(&inner);
        let mut diff = vec![0x0a, instruction.len() as u8];
        diff.extend_from_slice(&instruction);
        let err = WireError::ResizeOutOfRange { width: -1, height: 24 };
        assert_eq!(decode_user_message(&diff), Err(err.clone()));
        assert_eq!(decode_host_message(&diff), Err(err));
        // width 65536
        let diff = hex::decode("0a081a0628808004301e").unwrap();
        assert_eq!(
            decode_host_message(&diff),
            Err(WireError::ResizeOutOfRange { width: 65536, height: 30 })
        );
    }

    #[test]
    fn version_other_than_two_is_refused() {
        let instruction = Instruction { new_num: StateNum(1), ..Instruction::default() };
        let mut bytes = encode_instruction(&instruction);
        assert_eq!(bytes[..2], [0x08, 0x02]);
        bytes[1] = 3;
        assert_eq!(decode_instruction(&bytes), Err(WireError::ProtocolVersionMismatch { got: 3 }));
        assert_eq!(
            decode_instruction(&bytes[2..]),
            Err(WireError::ProtocolVersionMismatch { got: 0 })
        );
        assert!(matches!(decode_instruction(&[0x08]), Err(WireError::ProtobufDecode { .. })));
    }

    #[test]
    fn keys_merge_and_resizes_split() {
        let events = [
            UserEvent::Keys(b"l".to_vec()),
            UserEvent::Keys(b"s".to_vec()),
            UserEvent::Resize { cols: 80, rows: 24 },
            UserEvent::Resize { cols: 100, rows: 30 },
            UserEvent::Keys(Vec::new()),
            UserEvent::Keys(b"\r".to_vec()),
        ];
        assert_eq!(
            decode_user_message(&encode_user_message(&events)).unwrap(),
            vec![
                UserEvent::Keys(b"ls".to_vec()),
                UserEvent::Resize { cols: 80, rows: 24 },
                UserEvent::Resize { cols: 100, rows: 30 },
                UserEvent::Keys(b"\r".to_vec()),
            ]
        );
        assert!(encode_user_message(&[UserEvent::Keys(Vec::new())]).is_empty());
    }
}
