// kf_fsign: sign-bit operations on a W-bit float (combinational, latency 0).
//   MODE 0: neg (flip the sign), 1: abs (clear it), 2: copysign(a, b).  NaN payloads are kept.
`default_nettype none
module kf_fsign #(
    parameter W    = 32,
    parameter MODE = 0
) (
    input  wire [W-1:0] a,
    input  wire [W-1:0] b,
    output wire [W-1:0] y
);
    wire s = (MODE == 0) ? ~a[W-1] : (MODE == 1) ? 1'b0 : b[W-1];
    assign y = {s, a[W-2:0]};
    wire unused_b = |b[W-2:0];
endmodule
`default_nettype wire
