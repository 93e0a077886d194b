//! mosh's protobuf messages as prost structs (proto2; extensions become plain optional fields).
//!
//! Field numbers from MOSH-PROTOCOL.md 5. Every field is `optional` so that encoding writes exactly
//! the fields we set, zeros and empty strings included, like the stock sender.

/// `TransportBuffers.Instruction`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TransportInstruction {
    #[prost(uint32, optional, tag = "1")]
    pub protocol_version: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub old_num: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub new_num: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub ack_num: Option<u64>,
    #[prost(uint64, optional, tag = "5")]
    pub throwaway_num: Option<u64>,
    #[prost(bytes = "vec", optional, tag = "6")]
    pub diff: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "7")]
    pub chaff: Option<Vec<u8>>,
}

/// `ClientBuffers.UserMessage`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct UserMessage {
    #[prost(message, repeated, tag = "1")]
    pub instruction: Vec<UserInstruction>,
}

/// `ClientBuffers.Instruction` with its two extensions.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct UserInstruction {
    #[prost(message, optional, tag = "2")]
    pub keystroke: Option<Keystroke>,
    #[prost(message, optional, tag = "3")]
    pub resize: Option<ResizeMessage>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Keystroke {
    #[prost(bytes = "vec", optional, tag = "4")]
    pub keys: Option<Vec<u8>>,
}

/// `ClientBuffers.ResizeMessage` and `HostBuffers.ResizeMessage` (same layout).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResizeMessage {
    #[prost(int32, optional, tag = "5")]
    pub width: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    pub height: Option<i32>,
}

/// `HostBuffers.HostMessage`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HostMessage {
    #[prost(message, repeated, tag = "1")]
    pub instruction: Vec<HostInstruction>,
}

/// `HostBuffers.Instruction` with its three extensions.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HostInstruction {
    #[prost(message, optional, tag = "2")]
    pub hostbytes: Option<HostBytes>,
    #[prost(message, optional, tag = "3")]
    pub resize: Option<ResizeMessage>,
    #[prost(message, optional, tag = "7")]
    pub echoack: Option<EchoAck>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HostBytes {
    #[prost(bytes = "vec", optional, tag = "4")]
    pub hoststring: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct EchoAck {
    #[prost(uint64, optional, tag = "8")]
    pub echo_ack_num: Option<u64>,
}
