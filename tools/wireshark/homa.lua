-- homa.lua: a Wireshark dissector for Homa, the datacenter transport.
--
-- Decodes the wire format of Linux Homa (HomaModule, the layout of
-- homa_wire.h since 2025-07: GRANT without resend_all) and of homa-rs
-- (crates/homa-wire), which is byte-compatible with it and adds a few
-- extensions (DATA flag bits, the MISMATCH, RTT_PROBE and RTT_RESPS types,
-- RESEND length 0):
--
--   * raw IPv4 and IPv6, IP protocol 146;
--   * Homa over UDP (homa-rs's default transport: the Homa packet is the
--     whole UDP payload and the Homa ports equal the UDP ports), on the
--     ports of the "UDP ports" preference and, by a heuristic, on any port;
--   * GSO super-packets, split into their segments: homa-rs's UDP GSO sends
--     (whole Homa packets back to back in one datagram) and Linux Homa's TSO
--     packets without TCP hijacking (one DATA header, then the segments'
--     data, each after the first preceded by a 4-byte offset header).
--
-- Use: tshark -X lua_script:homa.lua -r FILE, or copy this file into
-- ~/.local/lib/wireshark/plugins/. See docs/wireshark.md.
--
-- Every multi-byte field is big-endian. Malformed or truncated packets get
-- expert info; the dissector reads no byte it has not checked is there.

local homa = Proto("homa", "Homa Transport Protocol")

---------------------------------------------------------------------------
-- Wire constants
---------------------------------------------------------------------------

local IPPROTO_HOMA = 146
local COMMON_LEN = 28
local DATA_LEN = 56
local DATA_COMMON_REPLICATED = 52 -- DATA header without the segment offset
local ACK_ENTRY_LEN = 10
local MAX_ACKS = 5
local MAX_PRIORITIES = 8
local RESEND_UPSTREAM_LEN = 36 -- upstream Linux build: RESEND without priority

local T_DATA, T_GRANT, T_RESEND, T_RPC_UNKNOWN, T_BUSY = 0x10, 0x11, 0x12, 0x13, 0x14
local T_CUTOFFS, T_FREEZE, T_NEED_ACK, T_ACK, T_MISMATCH = 0x15, 0x16, 0x17, 0x18, 0x1f
local T_RTT_PROBE, T_RTT_RESPS = 0x1d, 0x1e
local T_STREAM = 0x1c
local RATIO_UNKNOWN = 0xFFFF

local TYPE_NAMES = {
    [T_DATA] = "DATA",
    [T_GRANT] = "GRANT",
    [T_RESEND] = "RESEND",
    [T_RPC_UNKNOWN] = "RPC_UNKNOWN",
    [T_BUSY] = "BUSY",
    [T_CUTOFFS] = "CUTOFFS",
    [T_FREEZE] = "FREEZE",
    [T_NEED_ACK] = "NEED_ACK",
    [T_ACK] = "ACK",
    [T_MISMATCH] = "MISMATCH",
    [T_RTT_PROBE] = "RTT_PROBE",
    [T_RTT_RESPS] = "RTT_RESPS",
    [T_STREAM] = "STREAM",
}

local TYPE_MEANING = {
    [T_DATA] = "message bytes",
    [T_GRANT] = "receiver to sender: you may send up to an offset, at a priority",
    [T_RESEND] = "receiver to sender: send this byte range again",
    [T_RPC_UNKNOWN] = "I have no state for this RPC",
    [T_BUSY] = "I am alive but choose not to send for this RPC now",
    [T_CUTOFFS] = "receiver to sender: the unscheduled priority cutoffs to use",
    [T_FREEZE] = "debugging: freeze your time trace",
    [T_NEED_ACK] = "server to client: acknowledge this response so I can free it",
    [T_ACK] = "client to server: these RPCs are finished",
    [T_MISMATCH] = "homa-rs extension: I run the other design (Homa vs SIRD)",
    [T_RTT_PROBE] = "homa-rs extension (ByteDance mode): echo this nonce at once, to measure the RTT",
    [T_RTT_RESPS] = "homa-rs extension (ByteDance mode): the echo of an RTT_PROBE's nonce",
    [T_STREAM] = "homa-rs extension (RPC streaming): open/accept/ack/reset a stream",
}

-- Bytes of header each type occupies (for DATA, before the message bytes).
local HEADER_LEN = {
    [T_DATA] = DATA_LEN,
    [T_GRANT] = COMMON_LEN + 5,
    [T_RESEND] = COMMON_LEN + 9,
    [T_RPC_UNKNOWN] = COMMON_LEN,
    [T_BUSY] = COMMON_LEN,
    [T_CUTOFFS] = COMMON_LEN + 4 * MAX_PRIORITIES + 2,
    [T_FREEZE] = COMMON_LEN,
    [T_NEED_ACK] = COMMON_LEN,
    [T_ACK] = COMMON_LEN + 2 + MAX_ACKS * ACK_ENTRY_LEN,
    [T_MISMATCH] = COMMON_LEN,
    [T_RTT_PROBE] = COMMON_LEN + 14,
    [T_RTT_RESPS] = COMMON_LEN + 14,
    [T_STREAM] = COMMON_LEN + 8,
}

-- The doff byte (offset 12): header length in 4-byte words, high nibble.
-- homa-rs writes 0xE0 for DATA (56 bytes) and 0x50 for the rest; Linux
-- without TCP hijacking writes 0xD0 for DATA (the 52 bytes TSO replicates).
local function canonical_doff(t)
    if t == T_DATA then return 0xE0 end
    return 0x50
end

local DATA_FLAG_INCAST = 0x01
local DATA_FLAG_SIRD = 0x02
local DATA_FLAG_CSN = 0x04
local DATA_FLAG_BYTEDANCE = 0x08
local DATA_FLAGS_KNOWN = 0x0F

local RESEND_ALL = 0xFFFFFFFF
local CUTOFF_UNLIMITED = 0x7FFFFFFF
local OFFSET_IN_SEQUENCE = 0xFFFFFFFF -- DATA offset field -1
local HIJACK_URGENT = 0xb97d
local LINUX_TCP_FLAGS = 0x06 -- SYN|RST, impossible in real TCP

---------------------------------------------------------------------------
-- Fields
---------------------------------------------------------------------------

local GSO_FORMATS = {
    [1] = "homa-rs UDP GSO: whole Homa packets back to back",
    [2] = "Linux TSO without TCP hijacking: one DATA header, then segments with 4-byte offset headers",
}

local f = {
    -- common header
    sport = ProtoField.uint16("homa.sport", "Source port", base.DEC, nil, nil,
        "Homa port of the sender (bytes 0-1, where TCP has its source port)"),
    dport = ProtoField.uint16("homa.dport", "Destination port", base.DEC, nil, nil,
        "Homa port of the receiver (bytes 2-3)"),
    port = ProtoField.uint16("homa.port", "Source or destination port", base.DEC),
    sequence = ProtoField.uint32("homa.sequence", "Sequence", base.DEC, nil, nil,
        "Bytes 4-7, TCP's sequence number: in DATA the message offset of the first data byte "
            .. "(in Linux TSO without hijacking right only in the first segment); zero in other types"),
    unused_ack = ProtoField.bytes("homa.unused_ack", "Unused (TCP ack bytes)", base.NONE,
        "Bytes 8-10, the high bytes of TCP's ack number; zero"),
    type = ProtoField.uint8("homa.type", "Type", base.HEX, TYPE_NAMES, nil,
        "Packet type (byte 11, the low byte of TCP's ack number)"),
    doff = ProtoField.uint8("homa.doff", "Header length", base.DEC, nil, 0xF0,
        "Byte 12, TCP's data offset: header length in 4-byte words (DATA 14, or 13 from Linux; others 5)"),
    tcp_flags = ProtoField.uint8("homa.tcp_flags", "TCP flags", base.HEX, nil, nil,
        "Byte 13; used only in Linux's TCP-hijacking mode, else zero"),
    window = ProtoField.uint16("homa.window", "Window", base.DEC, nil, nil,
        "Bytes 14-15, TCP's window; unused, zero"),
    checksum = ProtoField.uint16("homa.checksum", "Checksum", base.HEX, nil, nil,
        "Bytes 16-17, TCP's checksum; set only in Linux's TCP-hijacking mode"),
    urgent = ProtoField.uint16("homa.urgent", "Urgent", base.HEX, nil, nil,
        "Bytes 18-19, TCP's urgent pointer; 0xb97d marks a Linux TCP-hijacked Homa packet"),
    sender_id = ProtoField.uint64("homa.sender_id", "Sender's RPC id", base.DEC, nil, nil,
        "Bytes 20-27: the RPC id as the sender of this packet knows it (even from the client, id|1 from the server)"),
    rpc_id = ProtoField.uint64("homa.rpc_id", "RPC id", base.DEC, nil, nil,
        "The client's (even) id of the RPC: the same in both directions, for filtering one RPC"),
    sender_role = ProtoField.uint8("homa.sender_role", "Sent by", base.DEC,
        { [0] = "client (id even)", [1] = "server (id odd)" }, nil,
        "Low bit of the sender's id: 0 = the client of the RPC sent this packet, 1 = the server"),

    -- DATA
    data_message_length = ProtoField.uint32("homa.data.message_length", "Message length", base.DEC, nil, nil,
        "Total bytes in the message"),
    data_incoming = ProtoField.uint32("homa.data.incoming", "Incoming", base.DEC, nil, nil,
        "The receiver can count on every byte below this offset arriving without more grants "
            .. "(unscheduled bytes, granted bytes, plus any round-up the sender added)"),
    data_cutoff_version = ProtoField.uint16("homa.data.cutoff_version", "Cutoff version", base.DEC, nil, nil,
        "Version of the newest CUTOFFS the sender got from this receiver; 0 = none yet"),
    data_retransmit = ProtoField.uint8("homa.data.retransmit", "Retransmit", base.DEC, nil, nil,
        "1 = this packet answers a RESEND (was sent before)"),
    data_flags = ProtoField.uint8("homa.data.flags", "Flags (homa-rs extension)", base.HEX, nil, nil,
        "Byte 49, the first pad byte; Linux writes zero and ignores it"),
    data_flag_incast = ProtoField.bool("homa.data.flags.incast", "Incast", 8,
        { "client has many RPCs outstanding: send the response with a small unscheduled prefix", "not set" },
        DATA_FLAG_INCAST),
    data_flag_sird = ProtoField.bool("homa.data.flags.sird", "SIRD", 8,
        { "sender runs SIRD (credit-scheduled), not Homa", "not set (Homa)" }, DATA_FLAG_SIRD),
    data_flag_csn = ProtoField.bool("homa.data.flags.csn", "CSN", 8,
        { "congested sender: holds at least its threshold of unspent credit", "not set" }, DATA_FLAG_CSN),
    data_flag_bytedance = ProtoField.bool("homa.data.flags.bytedance", "ByteDance", 8,
        { "sender runs ByteDance mode and answers RTT_PROBE", "not set" }, DATA_FLAG_BYTEDANCE),
    data_flag_reserved = ProtoField.uint8("homa.data.flags.reserved", "Reserved", base.HEX, nil, 0xC0,
        "Flag bits no implementation defines; zero (0x10 stream, 0x20 FIN: RPC streaming)"),
    data_pad = ProtoField.bytes("homa.data.pad", "Pad", base.NONE, "Bytes 50-51; zero"),
    data_offset = ProtoField.uint32("homa.data.offset", "Offset", base.DEC, nil, nil,
        "Offset in the message of this packet's (segment's) first data byte"),
    data_seg_offset = ProtoField.int32("homa.data.seg_offset", "Segment offset field", base.DEC, nil, nil,
        "Bytes 52-55 when they hold -1: Linux TSO with TCP hijacking, the offset is in the sequence field"),
    data_length = ProtoField.uint32("homa.data.length", "Data length", base.DEC, nil, nil,
        "Message bytes this packet (segment) carries"),
    data_end = ProtoField.uint32("homa.data.end", "End offset", base.DEC, nil, nil,
        "Offset just past this packet's (segment's) last data byte"),
    data_payload = ProtoField.bytes("homa.data.payload", "Message bytes"),
    data_credit_request = ProtoField.bool("homa.data.sird_credit_request", "SIRD credit request", base.NONE,
        { "yes: empty DATA announcing a scheduled message", "no" }, nil,
        "SIRD: an empty DATA packet (offset 0, no data, incoming 0) that asks the receiver for credit"),

    -- ack entries (in DATA and ACK)
    ack_client_id = ProtoField.uint64("homa.ack.client_id", "Client id", base.DEC, nil, nil,
        "The client's id of a finished RPC, whose state the server may free; 0 = no ack"),
    ack_server_port = ProtoField.uint16("homa.ack.server_port", "Server port", base.DEC, nil, nil,
        "The server port the acknowledged RPC was sent to"),

    -- GRANT
    grant_offset = ProtoField.uint32("homa.grant.offset", "Offset", base.DEC, nil, nil,
        "The sender may now send every byte of the message below this offset (SIRD: credit, cumulative)"),
    grant_priority = ProtoField.uint8("homa.grant.priority", "Priority", base.DEC, nil, nil,
        "Priority (0 lowest .. 7 highest) for all further DATA of this message"),

    -- RESEND
    resend_offset = ProtoField.uint32("homa.resend.offset", "Offset", base.DEC, nil, nil,
        "First message byte to send again"),
    resend_length = ProtoField.uint32("homa.resend.length", "Length", base.DEC, nil, nil,
        "Bytes to send again; 0xffffffff = everything sent so far; 0 = liveness probe (homa-rs only)"),
    resend_priority = ProtoField.uint8("homa.resend.priority", "Priority", base.DEC, nil, nil,
        "Priority (0 lowest .. 7 highest) for the retransmitted DATA; absent in the 36-byte upstream layout"),

    -- CUTOFFS
    cutoffs_cutoff = ProtoField.uint32("homa.cutoffs.cutoff", "Cutoff", base.DEC, nil, nil,
        "Largest message length (bytes) whose unscheduled bytes use this priority; 0x7fffffff = no limit"),
    cutoffs_version = ProtoField.uint16("homa.cutoffs.version", "Cutoff version", base.DEC, nil, nil,
        "Version of this set of cutoffs, to be echoed in DATA packets"),

    -- RTT_PROBE / RTT_RESPS
    rtt_nonce = ProtoField.uint64("homa.rtt.nonce", "Nonce", base.HEX, nil, nil,
        "Opaque to the receiver (the paper's timestamp_ns): a response echoes its probe's"),
    rtt_link_mbps = ProtoField.uint32("homa.rtt.link_mbps", "Link rate", base.DEC, nil, nil,
        "The packet sender's link rate (Mbit/s); 0 = unknown"),
    rtt_unsched_ratio = ProtoField.uint16("homa.rtt.unsched_ratio", "Unscheduled ratio", base.DEC, nil, nil,
        "Share of the packet sender's incoming bytes that are unscheduled (thousandths); 65535 = not measured"),

    -- STREAM
    stream_op = ProtoField.uint8("homa.stream.op", "Op", base.DEC,
        { [1] = "OPEN", [2] = "ACCEPT", [3] = "ACK", [4] = "RESET", [5] = "MISSING" }, nil,
        "What the STREAM packet does"),
    stream_next = ProtoField.uint16("homa.stream.next", "Next", base.DEC, nil, nil,
        "ACK/MISSING: the next message expected (all below arrived)"),
    stream_limit = ProtoField.uint16("homa.stream.limit", "Limit", base.DEC, nil, nil,
        "The packet sender accepts messages below this (its receive window)"),
    data_stream_seq = ProtoField.uint16("homa.data.stream_seq", "Stream sequence", base.DEC, nil, nil,
        "Bytes 50-51 with the stream flag: the message's sequence number in its direction"),

    -- ACK
    ack_num_acks = ProtoField.uint16("homa.ack.num_acks", "Number of acks", base.DEC, nil, nil,
        "How many of the 5 ack entries are valid"),
    ack_unused = ProtoField.bytes("homa.ack.unused", "Unused ack entries"),

    -- anything else
    padding = ProtoField.bytes("homa.padding", "Padding", base.NONE,
        "Bytes after a control packet's fixed body (ignored by receivers)"),
    unknown_body = ProtoField.bytes("homa.unknown_body", "Body of unknown type"),

    -- GSO super-packets
    gso_format = ProtoField.uint8("homa.gso.format", "GSO format", base.DEC, GSO_FORMATS),
    gso_segments = ProtoField.uint16("homa.gso.segments", "GSO segments", base.DEC, nil, nil,
        "Packets the network will see once this super-packet is segmented"),
    gso_segment_size = ProtoField.uint32("homa.gso.segment_size", "GSO segment size", base.DEC, nil, nil,
        "Bytes per segment (the last may be shorter): whole packets (format 1) or offset header + data (format 2)"),
    gso_segment = ProtoField.uint16("homa.gso.segment", "Segment", base.DEC, nil, nil,
        "Index (from 1) of this segment in its super-packet"),
}

local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
homa.fields = field_list

local e = {
    truncated = ProtoExpert.new("homa.expert.truncated", "Truncated Homa packet",
        expert.group.MALFORMED, expert.severity.ERROR),
    unknown_type = ProtoExpert.new("homa.expert.unknown_type", "Unknown Homa packet type",
        expert.group.MALFORMED, expert.severity.ERROR),
    bad_priority = ProtoExpert.new("homa.expert.bad_priority", "Priority above 7",
        expert.group.MALFORMED, expert.severity.ERROR),
    too_many_acks = ProtoExpert.new("homa.expert.too_many_acks", "More than 5 acks",
        expert.group.MALFORMED, expert.severity.ERROR),
    data_range = ProtoExpert.new("homa.expert.data_range", "Data beyond the end of the message",
        expert.group.MALFORMED, expert.severity.ERROR),
    reserved = ProtoExpert.new("homa.expert.reserved", "Reserved bits or bytes not zero",
        expert.group.PROTOCOL, expert.severity.WARN),
    port_mismatch = ProtoExpert.new("homa.expert.port_mismatch", "Homa ports differ from UDP ports",
        expert.group.PROTOCOL, expert.severity.WARN),
    doff = ProtoExpert.new("homa.expert.doff", "Unusual header length (doff)",
        expert.group.PROTOCOL, expert.severity.NOTE),
    unused_nonzero = ProtoExpert.new("homa.expert.unused_nonzero", "Unused TCP-like fields not zero",
        expert.group.PROTOCOL, expert.severity.NOTE),
    sequence = ProtoExpert.new("homa.expert.sequence", "Sequence field differs from the DATA offset",
        expert.group.SEQUENCE, expert.severity.NOTE),
    padding = ProtoExpert.new("homa.expert.padding", "Bytes after the packet's fixed body",
        expert.group.PROTOCOL, expert.severity.NOTE),
    resend_short = ProtoExpert.new("homa.expert.resend_short", "RESEND without priority (upstream Linux layout)",
        expert.group.PROTOCOL, expert.severity.CHAT),
    gso = ProtoExpert.new("homa.expert.gso", "GSO super-packet",
        expert.group.REASSEMBLE, expert.severity.CHAT),
    extension = ProtoExpert.new("homa.expert.extension", "homa-rs extension (Linux Homa ignores or drops it)",
        expert.group.PROTOCOL, expert.severity.CHAT),
    internal = ProtoExpert.new("homa.expert.internal", "Homa dissector failure",
        expert.group.MALFORMED, expert.severity.ERROR),
}
homa.experts = { e.truncated, e.unknown_type, e.bad_priority, e.too_many_acks, e.data_range, e.reserved,
    e.port_mismatch, e.doff, e.unused_nonzero, e.sequence, e.padding, e.resend_short, e.gso, e.extension,
    e.internal }

---------------------------------------------------------------------------
-- Preferences
---------------------------------------------------------------------------

local DEFAULT_UDP_PORTS = "4000"
homa.prefs.udp_ports = Pref.range("UDP ports", DEFAULT_UDP_PORTS,
    "UDP ports decoded as Homa (homa-rs's UDP mode: the UDP port is the Homa port; "
        .. "its examples and benchmarks use 4000)", 65535)
homa.prefs.udp_heuristic = Pref.bool("Detect Homa on any UDP port", true,
    "Decode a UDP payload as Homa when it starts with a Homa header whose ports equal the UDP ports")
homa.prefs.split_gso = Pref.bool("Split GSO super-packets", true,
    "Show a captured GSO/TSO super-packet as the packets the network will carry")
homa.prefs.mtu = Pref.uint("Link MTU", 1500,
    "A DATA packet whose IP packet is longer than this is checked for Linux TSO segment headers "
        .. "at the segment size of this MTU (and of 1500 and 9000)")

---------------------------------------------------------------------------
-- Helpers. Every reader returns nil when the bytes are not there.
---------------------------------------------------------------------------

local function has(v, flag)
    return math.floor(v / flag) % 2 == 1
end

local function fmt_int(v)
    return string.format("%d", v)
end

-- Adds `field` over tvb(off, size) if the bytes are there.
local function add_if(tree, field, tvb, off, size)
    if off + size <= tvb:len() then
        return tree:add(field, tvb(off, size))
    end
    return nil
end

local function u8(tvb, off)
    if off + 1 <= tvb:len() then return tvb(off, 1):uint() end
    return nil
end

local function u16(tvb, off)
    if off + 2 <= tvb:len() then return tvb(off, 2):uint() end
    return nil
end

local function u32(tvb, off)
    if off + 4 <= tvb:len() then return tvb(off, 4):uint() end
    return nil
end

local function u64(tvb, off)
    if off + 8 <= tvb:len() then return tvb(off, 8):uint64() end
    return nil
end

local function all_zero(tvb, off, size)
    for i = off, math.min(off + size, tvb:len()) - 1 do
        if tvb(i, 1):uint() ~= 0 then return false end
    end
    return true
end

-- Big-endian u32 at 0-based `pos` of the Lua string `s`.
local function s_be32(s, pos)
    local a, b, c, d = s:byte(pos + 1, pos + 4)
    return ((a * 256 + b) * 256 + c) * 256 + d
end

local function type_name(t)
    return TYPE_NAMES[t] or string.format("UNKNOWN(0x%02x)", t)
end

local function truncated(tree, tvb, what, needed)
    local why = "capture snapshot cut it"
    if tvb:reported_len() <= tvb:len() then why = "packet too short" end
    tree:add_proto_expert_info(e.truncated, string.format(
        "Truncated %s: need %d bytes, got %d (%s)", what, needed, tvb:len(), why))
end

-- Adds the fields of one 10-byte ack entry at `off` to a new subtree.
local function add_ack_entry(tree, tvb, off, label)
    local id = u64(tvb, off)
    local port = u16(tvb, off + 8)
    local sub = tree:add(homa, tvb(off, math.min(ACK_ENTRY_LEN, tvb:len() - off)), label)
    add_if(sub, f.ack_client_id, tvb, off, 8)
    add_if(sub, f.ack_server_port, tvb, off + 8, 2)
    if id and port then
        if id == UInt64(0) then
            sub:append_text(": none")
        else
            sub:append_text(string.format(": client id %s, server port %d", tostring(id), port))
        end
    end
    return id, port
end

local function add_priority(tree, field, tvb, off)
    local item = add_if(tree, field, tvb, off, 1)
    local p = u8(tvb, off)
    if item and p >= MAX_PRIORITIES then
        item:add_proto_expert_info(e.bad_priority,
            string.format("Priority %d: the wire format has levels 0..7", p))
    end
    return p
end

---------------------------------------------------------------------------
-- One Homa packet
---------------------------------------------------------------------------

-- Dissects the common header into `tree`; returns type, sender id (or nil).
local function dissect_common(tvb, pinfo, tree, ctx)
    local len = tvb:len()
    local sub = tree:add(homa, tvb(0, math.min(COMMON_LEN, len)), "Common header")
    local sport_item = add_if(sub, f.sport, tvb, 0, 2)
    local dport_item = add_if(sub, f.dport, tvb, 2, 2)
    if sport_item then sub:add(f.port, tvb(0, 2)):set_hidden() end
    if dport_item then sub:add(f.port, tvb(2, 2)):set_hidden() end
    add_if(sub, f.sequence, tvb, 4, 4)
    add_if(sub, f.unused_ack, tvb, 8, 3)
    local t = u8(tvb, 11)
    local type_item = add_if(sub, f.type, tvb, 11, 1)
    if type_item and TYPE_MEANING[t] then type_item:append_text(" (" .. TYPE_MEANING[t] .. ")") end
    local doff_item = add_if(sub, f.doff, tvb, 12, 1)
    local doff = u8(tvb, 12)
    if doff_item then
        doff_item:append_text(string.format(" words (%d bytes)", math.floor(doff / 16) * 4))
    end
    add_if(sub, f.tcp_flags, tvb, 13, 1)
    add_if(sub, f.window, tvb, 14, 2)
    add_if(sub, f.checksum, tvb, 16, 2)
    local urgent_item = add_if(sub, f.urgent, tvb, 18, 2)
    local id = u64(tvb, 20)
    if id then
        sub:add(f.sender_id, tvb(20, 8))
        local role = id:lower() % 2
        local rpc = id
        if role == 1 then rpc = id - 1 end
        sub:add(f.rpc_id, tvb(20, 8), rpc):set_generated()
        sub:add(f.sender_role, tvb(20, 8), role):set_generated()
    end

    if len < COMMON_LEN then
        truncated(sub, tvb, "common header", COMMON_LEN)
        return t, id
    end

    if doff ~= canonical_doff(t) and not (t == T_DATA and doff == 0xD0) and TYPE_NAMES[t] then
        doff_item:add_proto_expert_info(e.doff, string.format(
            "doff 0x%02x; expected 0x%02x for %s", doff, canonical_doff(t), type_name(t)))
    end
    -- Linux Homa writes TCP-hijacking marks on every packet, hijacked or
    -- not: flags 0x06, urgent 0xb97d and a checksum. They mean nothing else.
    local linux_marks = u8(tvb, 13) == LINUX_TCP_FLAGS and u16(tvb, 18) == HIJACK_URGENT
    if linux_marks then
        urgent_item:append_text(" (Linux Homa's TCP-hijacking mark, written on every packet)")
    end
    if not all_zero(tvb, 8, 3) or not all_zero(tvb, 14, 2)
        or (not linux_marks and not all_zero(tvb, 13, 7)) then
        sub:add_proto_expert_info(e.unused_nonzero,
            "Unused TCP-like fields (bytes 8-10, 13-19) are not zero (and not Linux's marks)")
    end
    if t ~= T_DATA and TYPE_NAMES[t] and u32(tvb, 4) ~= 0 then
        sub:add_proto_expert_info(e.unused_nonzero, "Sequence is not zero in a packet other than DATA")
    end
    if ctx.udp and ctx.top then
        if u16(tvb, 0) ~= pinfo.src_port or u16(tvb, 2) ~= pinfo.dst_port then
            sub:add_proto_expert_info(e.port_mismatch, string.format(
                "Homa ports %d -> %d, UDP ports %d -> %d (homa-rs drops such packets)",
                u16(tvb, 0), u16(tvb, 2), pinfo.src_port, pinfo.dst_port))
        end
    end
    return t, id
end

-- Flags DATA bytes that lie beyond the end of their message.
local function check_data_range(item, offset, length, message_length)
    if offset and length and message_length and offset + length > message_length then
        item:add_proto_expert_info(e.data_range, string.format(
            "Bytes %d..%d of a %d-byte message", offset, offset + length, message_length))
    end
end

local function dissect_data(tvb, pinfo, tree, id, ctx)
    local len = tvb:len()
    local sub = tree:add(homa, tvb(math.min(COMMON_LEN, len), math.max(0, math.min(DATA_LEN, len) - COMMON_LEN)),
        "DATA header")
    local msg_len = u32(tvb, 28)
    local item = add_if(sub, f.data_message_length, tvb, 28, 4)
    if item then item:append_text(" bytes") end
    item = add_if(sub, f.data_incoming, tvb, 32, 4)
    if item then item:append_text(" bytes") end
    local ack_id, ack_port
    if len > 36 then ack_id, ack_port = add_ack_entry(sub, tvb, 36, "Piggy-backed ack") end
    add_if(sub, f.data_cutoff_version, tvb, 46, 2)
    local retransmit = u8(tvb, 48)
    local rt_item = add_if(sub, f.data_retransmit, tvb, 48, 1)
    if rt_item then
        if retransmit == 0 then
            rt_item:append_text(" (no)")
        else
            rt_item:append_text(" (yes: sent because of a RESEND)")
        end
    end
    local flags = u8(tvb, 49)
    local flags_item = add_if(sub, f.data_flags, tvb, 49, 1)
    if flags_item then
        flags_item:add(f.data_flag_incast, tvb(49, 1))
        flags_item:add(f.data_flag_sird, tvb(49, 1))
        flags_item:add(f.data_flag_csn, tvb(49, 1))
        flags_item:add(f.data_flag_bytedance, tvb(49, 1))
        local r = flags_item:add(f.data_flag_reserved, tvb(49, 1))
        if flags % 256 >= 64 then
            r:add_proto_expert_info(e.reserved, string.format("Unknown DATA flag bits 0x%02x", flags - flags % 64))
        end
        if flags ~= 0 then
            flags_item:add_proto_expert_info(e.extension, "DATA flags are a homa-rs extension")
        end
    end
    local pad_item = nil
    if flags and has(flags, 0x10) then
        add_if(sub, f.data_stream_seq, tvb, 50, 2)
    else
        pad_item = add_if(sub, f.data_pad, tvb, 50, 2)
    end
    if pad_item and not all_zero(tvb, 50, 2) then
        pad_item:add_proto_expert_info(e.reserved, "Pad bytes 50-51 are not zero")
    end

    local raw = u32(tvb, 52)
    local sequence = u32(tvb, 4)
    local offset = raw
    if raw == OFFSET_IN_SEQUENCE then
        offset = sequence
        sub:add(f.data_seg_offset, tvb(52, 4)):append_text(" (the offset is in the sequence field)")
        sub:add(f.data_offset, tvb(4, 4), offset):set_generated()
    elseif raw then
        local off_item = sub:add(f.data_offset, tvb(52, 4))
        if sequence ~= raw then
            off_item:add_proto_expert_info(e.sequence, string.format(
                "Sequence %d, offset %d (normal in Linux TSO segments after the first)", sequence, raw))
        end
    end

    if len < DATA_LEN then
        truncated(sub, tvb, "DATA header", DATA_LEN)
        return string.format("DATA id=%s msg_len=%s [truncated]", tostring(id), msg_len and fmt_int(msg_len) or "?")
    end

    local data_len = len - DATA_LEN
    local len_item = sub:add(f.data_length, tvb(DATA_LEN, data_len), data_len)
    len_item:set_generated()
    len_item:append_text(" bytes")
    sub:add(f.data_end, tvb(DATA_LEN, data_len), offset + data_len):set_generated()
    local credit_request = has(flags, DATA_FLAG_SIRD) and offset == 0 and data_len == 0 and u32(tvb, 32) == 0
    if has(flags, DATA_FLAG_SIRD) then
        sub:add(f.data_credit_request, tvb(49, 1), credit_request):set_generated()
    end
    check_data_range(sub, offset, data_len, msg_len)
    if data_len > 0 then
        tree:add(f.data_payload, tvb(DATA_LEN, data_len))
    end

    local s = string.format("DATA id=%s offset=%d len=%d msg_len=%d", tostring(id), offset, data_len, msg_len)
    local marks = {}
    if retransmit ~= 0 then marks[#marks + 1] = "retransmit" end
    if has(flags, DATA_FLAG_INCAST) then marks[#marks + 1] = "incast" end
    if has(flags, DATA_FLAG_SIRD) then marks[#marks + 1] = "SIRD" end
    if has(flags, DATA_FLAG_CSN) then marks[#marks + 1] = "CSN" end
    if has(flags, DATA_FLAG_BYTEDANCE) then marks[#marks + 1] = "ByteDance" end
    if credit_request then marks[#marks + 1] = "credit request" end
    if ack_id and ack_id ~= UInt64(0) then
        marks[#marks + 1] = string.format("ack=%s:%d", tostring(ack_id), ack_port)
    end
    if #marks > 0 then s = s .. " [" .. table.concat(marks, ", ") .. "]" end
    return s
end

-- Trailing bytes after a control packet's fixed body.
local function dissect_padding(tvb, tree, body_end)
    if tvb:len() > body_end then
        local item = tree:add(f.padding, tvb(body_end, tvb:len() - body_end))
        item:add_proto_expert_info(e.padding, string.format("%d bytes after the %d-byte packet",
            tvb:len() - body_end, body_end))
    end
end

local function dissect_body(tvb, pinfo, tree, t, id, ctx)
    local len = tvb:len()
    local name = type_name(t)
    local ids = "id=" .. tostring(id)
    if t == T_DATA then
        return dissect_data(tvb, pinfo, tree, id, ctx)
    end
    local need = HEADER_LEN[t]
    if need == nil then
        local item = tree:add(homa, tvb(COMMON_LEN, 0), "Unknown type")
        item:add_proto_expert_info(e.unknown_type, string.format("Unknown Homa packet type 0x%02x", t))
        if len > COMMON_LEN then
            tree:add(f.unknown_body, tvb(COMMON_LEN, len - COMMON_LEN))
        end
        return string.format("%s %s", name, ids)
    end

    local body_len = need - COMMON_LEN
    local sub
    if body_len > 0 then
        sub = tree:add(homa, tvb(COMMON_LEN, math.max(0, math.min(need, len) - COMMON_LEN)), name .. " body")
    end
    local short = false
    if t == T_RESEND and len == RESEND_UPSTREAM_LEN then
        -- The upstream (stripped) Linux build has no priority byte.
        need = RESEND_UPSTREAM_LEN
        short = true
    end
    if len < need then
        truncated(sub or tree, tvb, name .. " packet", need)
    end
    local s = string.format("%s %s", name, ids)

    if t == T_GRANT then
        local off = u32(tvb, 28)
        local item = add_if(sub, f.grant_offset, tvb, 28, 4)
        if item then item:append_text(" bytes") end
        local p = add_priority(sub, f.grant_priority, tvb, 32)
        if off and p then s = string.format("%s offset=%d prio=%d", s, off, p) end
    elseif t == T_RESEND then
        local off = u32(tvb, 28)
        local l = u32(tvb, 32)
        add_if(sub, f.resend_offset, tvb, 28, 4)
        local litem = add_if(sub, f.resend_length, tvb, 32, 4)
        if litem then
            if l == RESEND_ALL then
                litem:append_text(" (all: nothing received yet, resend everything sent so far)")
            elseif l == 0 then
                litem:append_text(" (none: a liveness probe)")
                litem:add_proto_expert_info(e.extension, "RESEND length 0: homa-rs liveness probe")
            else
                litem:append_text(" bytes")
            end
        end
        local p
        if short then
            sub:add_proto_expert_info(e.resend_short,
                "36-byte RESEND: the upstream Linux layout, which has no priority byte")
        else
            p = add_priority(sub, f.resend_priority, tvb, 36)
        end
        if off and l then
            local ls
            if l == RESEND_ALL then ls = "all" else ls = fmt_int(l) end
            s = string.format("%s offset=%d len=%s", s, off, ls)
            if p then s = string.format("%s prio=%d", s, p) end
        end
    elseif t == T_CUTOFFS then
        for i = 0, MAX_PRIORITIES - 1 do
            local c = u32(tvb, 28 + 4 * i)
            local item = add_if(sub, f.cutoffs_cutoff, tvb, 28 + 4 * i, 4)
            if item then
                local limit = string.format("messages up to %d bytes", c)
                if c == CUTOFF_UNLIMITED then limit = "no limit (0x7fffffff)" end
                item:set_text(string.format("Priority %d cutoff: %s", i, limit))
            end
        end
        local v = u16(tvb, 60)
        add_if(sub, f.cutoffs_version, tvb, 60, 2)
        if v then s = string.format("%s version=%d", s, v) end
    elseif t == T_ACK then
        local n = u16(tvb, 28)
        local nitem = add_if(sub, f.ack_num_acks, tvb, 28, 2)
        if nitem and n > MAX_ACKS then
            nitem:add_proto_expert_info(e.too_many_acks, string.format("%d acks claimed; an ACK holds at most 5", n))
        end
        local valid = math.min(n or 0, MAX_ACKS)
        local acks = {}
        for i = 0, valid - 1 do
            local at = 30 + i * ACK_ENTRY_LEN
            if at < len then
                local aid, aport = add_ack_entry(sub, tvb, at, string.format("Ack %d", i + 1))
                if aid and aport then acks[#acks + 1] = string.format("%s:%d", tostring(aid), aport) end
            end
        end
        local unused_at = 30 + valid * ACK_ENTRY_LEN
        if unused_at < math.min(len, need) then
            local uitem = sub:add(f.ack_unused, tvb(unused_at, math.min(len, need) - unused_at))
            if not all_zero(tvb, unused_at, math.min(len, need) - unused_at) then
                uitem:append_text(" (not zero; ignored)")
            end
        end
        if n then
            s = string.format("%s num_acks=%d", s, n)
            if #acks > 0 then s = s .. " acks=" .. table.concat(acks, ",") end
        end
    elseif t == T_STREAM then
        local op = u8(tvb, 28)
        add_if(sub, f.stream_op, tvb, 28, 1)
        local nx = u16(tvb, 30)
        add_if(sub, f.stream_next, tvb, 30, 2)
        local lim = u16(tvb, 32)
        add_if(sub, f.stream_limit, tvb, 32, 2)
        if op and nx and lim then
            s = string.format("%s op=%d next=%d limit=%d", s, op, nx, lim)
        end
        tree:add_proto_expert_info(e.extension, "STREAM is a homa-rs extension (RPC streaming)")
    elseif t == T_MISMATCH then
        tree:add_proto_expert_info(e.extension, "MISMATCH is a homa-rs extension; Linux drops it")
    elseif t == T_RTT_PROBE or t == T_RTT_RESPS then
        add_if(sub, f.rtt_nonce, tvb, 28, 8)
        local link = u32(tvb, 36)
        local litem = add_if(sub, f.rtt_link_mbps, tvb, 36, 4)
        if litem then litem:append_text(" Mbit/s") end
        local ratio = u16(tvb, 40)
        local ritem = add_if(sub, f.rtt_unsched_ratio, tvb, 40, 2)
        if ritem and ratio == RATIO_UNKNOWN then ritem:append_text(" (not measured)") end
        if link and ratio then
            local rs = tostring(ratio)
            if ratio == RATIO_UNKNOWN then rs = "unknown" end
            s = string.format("%s link=%dMbps ratio=%s", s, link, rs)
        end
        tree:add_proto_expert_info(e.extension,
            string.format("%s is a homa-rs extension (ByteDance mode); Linux drops it", name))
    end

    if len < need then
        s = s .. " [truncated]"
    else
        dissect_padding(tvb, tree, need)
    end
    return s
end

-- Dissects one whole Homa packet (tvb holds exactly it) into `tree`;
-- returns its summary for the info column.
local function dissect_packet(tvb, pinfo, tree, ctx)
    local t, id = dissect_common(tvb, pinfo, tree, ctx)
    if tvb:len() < COMMON_LEN then
        local s = "Homa"
        if t then s = type_name(t) end
        if id then s = s .. " id=" .. tostring(id) end
        return s .. " [truncated]"
    end
    return dissect_body(tvb, pinfo, tree, t, id, ctx)
end

---------------------------------------------------------------------------
-- GSO super-packets
---------------------------------------------------------------------------

-- Format 1 (homa-rs UDP GSO): does a homa-rs header start at 0-based `pos`
-- of the raw bytes `s`, with the same ports as the first packet?
local function concat_header_at(s, pos, ports)
    if pos + COMMON_LEN > #s then return false end
    if s:sub(pos + 1, pos + 4) ~= ports then return false end
    local t = s:byte(pos + 12)
    if not TYPE_NAMES[t] or s:byte(pos + 13) ~= canonical_doff(t) then return false end
    for i = pos + 9, pos + 11 do
        if s:byte(i) ~= 0 then return false end
    end
    for i = pos + 14, pos + 20 do
        if s:byte(i) ~= 0 then return false end
    end
    return true
end

-- Returns the segment size if `s` is several homa-rs packets of `size`
-- bytes each (the last may be shorter), else nil.
local function concat_segments_ok(s, size)
    local len = #s
    local pos = size
    local ports = s:sub(1, 4)
    while pos < len do
        if not concat_header_at(s, pos, ports) then return false end
        pos = pos + size
    end
    return true
end

local function find_concat(s)
    local len = #s
    if len < 2 * COMMON_LEN then return nil end
    local t = s:byte(12)
    if not TYPE_NAMES[t] or not concat_header_at(s, 0, s:sub(1, 4)) then return nil end
    local ports = s:sub(1, 4)
    if t ~= T_DATA then
        -- homa-rs sends control packets without padding: the size is fixed.
        local size = HEADER_LEN[t]
        if len > size and concat_header_at(s, size, ports) and concat_segments_ok(s, size) then
            return size
        end
        return nil
    end
    local from = DATA_LEN
    while true do
        local at = s:find(ports, from + 1, true)
        if not at then return nil end
        local size = at - 1
        if concat_header_at(s, size, ports) and concat_segments_ok(s, size) then return size end
        from = at
    end
end

-- Format 2 (Linux TSO without hijacking). With D data bytes per segment,
-- segment k (from 0) has its offset header at 52 + k*(D+4) and its data
-- right after it. Returns D if every offset header continues the first.
local function linux_chain_ok(s, off0, d, msg_len)
    local len = #s
    local k = 1
    local data_total = d
    while true do
        local hdr = DATA_COMMON_REPLICATED + k * (d + 4)
        if hdr >= len then return false end -- a segment with no data
        if hdr + 4 > len then return false end
        if s_be32(s, hdr) ~= off0 + k * d then return false end
        local seg_data = math.min(d, len - hdr - 4)
        if seg_data <= 0 then return false end
        data_total = data_total + seg_data
        if hdr + 4 + d >= len then break end
        k = k + 1
    end
    return off0 + data_total <= msg_len
end

local function find_linux_gso(s, ip_overhead)
    local len = #s
    if len < DATA_LEN + 6 or s:byte(12) ~= T_DATA then return nil end
    local msg_len = s_be32(s, 28)
    local off0 = s_be32(s, 52)
    if off0 == OFFSET_IN_SEQUENCE then return nil end -- hijacking TSO: data is contiguous
    local plain_ok = off0 + (len - DATA_LEN) <= msg_len
    local mtu = homa.prefs.mtu
    if plain_ok and len + ip_overhead <= mtu then return nil end
    -- Linux fills every segment but the last to the MTU: try the segment
    -- sizes of the preference's MTU and of the usual ones first.
    for _, m in ipairs({ mtu, 1500, 9000 }) do
        local d = m - ip_overhead - DATA_LEN
        if d > 0 and d < len - DATA_LEN and linux_chain_ok(s, off0, d, msg_len) then
            return d
        end
    end
    -- Every other size only when the packet cannot be one plain DATA packet
    -- (its bytes overrun the message), so big plain packets stay cheap.
    if plain_ok then return nil end
    for d = 1, len - DATA_LEN - 5 do
        if s_be32(s, DATA_LEN + d) == off0 + d and linux_chain_ok(s, off0, d, msg_len) then
            return d
        end
    end
    return nil
end

local function dissect_linux_gso(tvb, pinfo, tree, ctx, d)
    local len = tvb:len()
    local n = 1
    while DATA_COMMON_REPLICATED + n * (d + 4) < len do n = n + 1 end
    tree:add(f.gso_format, tvb(0, 0), 2):set_generated()
    tree:add(f.gso_segments, tvb(0, 0), n):set_generated()
    tree:add(f.gso_segment_size, tvb(0, 0), d + 4):set_generated()
    tree:add_proto_expert_info(e.gso, string.format(
        "Linux TSO super-packet: %d segments of up to %d data bytes", n, d))

    local summaries = {}
    -- Segment 1: the DATA header and the first segment's data.
    local first = tree:add(homa, tvb(0, DATA_LEN + d), string.format("Segment 1 of %d", n))
    first:add(f.gso_segment, tvb(0, 0), 1):set_generated()
    local sub_ctx = { udp = ctx.udp, top = ctx.top }
    summaries[1] = dissect_packet(tvb(0, DATA_LEN + d):tvb(), pinfo, first, sub_ctx)
    first:append_text(": " .. summaries[1])

    local id = tvb(20, 8):uint64()
    local msg_len = tvb(28, 4):uint()
    for k = 1, n - 1 do
        local hdr = DATA_COMMON_REPLICATED + k * (d + 4)
        local seg_data = math.min(d, len - hdr - 4)
        local off = tvb(hdr, 4):uint()
        local seg = tree:add(homa, tvb(hdr, 4 + seg_data), string.format("Segment %d of %d", k + 1, n))
        seg:add(f.gso_segment, tvb(hdr, 0), k + 1):set_generated()
        seg:add(f.data_offset, tvb(hdr, 4)):append_text(" (segment offset header; the NIC puts the first "
            .. DATA_COMMON_REPLICATED .. " header bytes of segment 1 before it)")
        local len_item = seg:add(f.data_length, tvb(hdr + 4, seg_data), seg_data)
        len_item:set_generated()
        len_item:append_text(" bytes")
        seg:add(f.data_end, tvb(hdr + 4, seg_data), off + seg_data):set_generated()
        check_data_range(seg, off, seg_data, msg_len)
        seg:add(f.data_payload, tvb(hdr + 4, seg_data))
        local s = string.format("DATA id=%s offset=%d len=%d msg_len=%d", tostring(id), off, seg_data, msg_len)
        seg:append_text(": " .. s)
        summaries[#summaries + 1] = s
    end
    return string.format("[GSO %d segs] %s", n, table.concat(summaries, " | "))
end

local function dissect_concat(tvb, pinfo, tree, ctx, size)
    local len = tvb:len()
    local n = math.ceil(len / size)
    tree:add(f.gso_format, tvb(0, 0), 1):set_generated()
    tree:add(f.gso_segments, tvb(0, 0), n):set_generated()
    tree:add(f.gso_segment_size, tvb(0, 0), size):set_generated()
    tree:add_proto_expert_info(e.gso, string.format("UDP GSO super-packet: %d Homa packets of %d bytes", n, size))
    local summaries = {}
    for k = 0, n - 1 do
        local at = k * size
        local seg_len = math.min(size, len - at)
        local seg = tree:add(homa, tvb(at, seg_len), string.format("Segment %d of %d", k + 1, n))
        seg:add(f.gso_segment, tvb(at, 0), k + 1):set_generated()
        local s = dissect_packet(tvb(at, seg_len):tvb(), pinfo, seg, { udp = ctx.udp, top = ctx.top })
        seg:append_text(": " .. s)
        summaries[#summaries + 1] = s
    end
    return string.format("[GSO %d segs] %s", n, table.concat(summaries, " | "))
end

---------------------------------------------------------------------------
-- Entry points
---------------------------------------------------------------------------

local function dissect_top(tvb, pinfo, tree, udp)
    pinfo.cols.protocol = "Homa"
    local len = tvb:len()
    local root = tree:add(homa, tvb(0, len))
    if udp then root:append_text(" (over UDP)") end
    local ctx = { udp = udp, top = true }

    local summary
    if homa.prefs.split_gso and len >= 2 * COMMON_LEN then
        local s = tvb:raw(0, len)
        local size = find_concat(s)
        if size then
            summary = dissect_concat(tvb, pinfo, root, ctx, size)
        else
            local ip_overhead = 20
            if pinfo.net_src and tostring(pinfo.net_src):find(":", 1, true) then ip_overhead = 40 end
            if udp then ip_overhead = ip_overhead + 8 end
            local d = find_linux_gso(s, ip_overhead)
            if d then summary = dissect_linux_gso(tvb, pinfo, root, ctx, d) end
        end
    end
    if not summary then
        summary = dissect_packet(tvb, pinfo, root, ctx)
    end
    root:append_text(", " .. summary)
    pinfo.cols.info:set(summary)
    return len
end

local function safe_dissect(tvb, pinfo, tree, udp)
    local ok, err = pcall(dissect_top, tvb, pinfo, tree, udp)
    if not ok then
        tree:add_proto_expert_info(e.internal, "Homa dissector failure: " .. tostring(err))
    end
    return tvb:len()
end

function homa.dissector(tvb, pinfo, tree)
    -- pinfo.port_type is 3 (PT_UDP) when UDP carried the packet.
    local udp = pinfo.port_type == 3
    return safe_dissect(tvb, pinfo, tree, udp)
end

-- Heuristic for UDP on any port: a Homa header whose ports are the UDP
-- ports (homa-rs requires that), a known type, and a plausible doff.
local function heuristic(tvb, pinfo, tree)
    if not homa.prefs.udp_heuristic or tvb:len() < COMMON_LEN then return false end
    if tvb(0, 2):uint() ~= pinfo.src_port or tvb(2, 2):uint() ~= pinfo.dst_port then return false end
    local t = tvb(11, 1):uint()
    if not TYPE_NAMES[t] then return false end
    local doff = tvb(12, 1):uint()
    if doff ~= canonical_doff(t) and not (t == T_DATA and doff == 0xD0) then return false end
    safe_dissect(tvb, pinfo, tree, true)
    return true
end

DissectorTable.get("ip.proto"):add(IPPROTO_HOMA, homa)

local udp_table = DissectorTable.get("udp.port")
local registered_ports = ""

local function register_udp_ports()
    local want = homa.prefs.udp_ports
    local want_str = tostring(want or "")
    if want_str == registered_ports then return end
    if registered_ports ~= "" then udp_table:remove(registered_ports, homa) end
    if want_str ~= "" then udp_table:add(want_str, homa) end
    registered_ports = want_str
end

function homa.prefs_changed()
    register_udp_ports()
end

register_udp_ports()
homa:register_heuristic("udp", heuristic)
