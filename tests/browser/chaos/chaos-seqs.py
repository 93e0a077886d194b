#!/usr/bin/env python3
"""The chaos test's nonce tap (tests/browser/chaos/chaos.mjs): records the sequence number of every mosh
datagram between tern-relay and mosh-server, both directions, from loopback in the test's own
network namespace (an AF_PACKET socket: the namespace's root may open one). A mosh datagram
starts with the last 8 bytes of its OCB nonce in the clear: the direction bit (1: to the client)
and a 63-bit sequence number. A repeat under one session's key is a nonce reuse. Writes one line
per datagram, `SRC_PORT DST_PORT NONCE_HEX`, for the datagrams from or to a port in LOW..HIGH.

    python3 chaos-seqs.py OUT LOW HIGH
"""
import socket
import struct
import sys

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def main():
    out_path, low, high = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    out = open(out_path, "w", buffering=1)
    print("chaos-seqs ready", flush=True)
    while True:
        frame, addr = sock.recvfrom(65600)
        # Loopback shows every packet twice, leaving and arriving: keep the arrival.
        if addr[2] == PACKET_OUTGOING:
            continue
        ip = frame[14:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_UDP:
            continue
        ihl = (ip[0] & 0x0F) * 4
        sport, dport = struct.unpack("!HH", ip[ihl : ihl + 4])
        payload = ip[ihl + 8 :]
        if not (low <= sport <= high or low <= dport <= high) or len(payload) < 8:
            continue
        out.write(f"{sport} {dport} {payload[:8].hex()}\n")


if __name__ == "__main__":
    main()
