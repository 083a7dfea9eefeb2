// kf_ishift: integer shift with the amount masked to its low log2(W) bits (combinational,
//   latency 0).  LEFT = 1: a << (b & (W-1)); LEFT = 0: a >> (b & (W-1)), arithmetic when
//   SIGNED = 1, logical otherwise.  W must be a power of two.
`default_nettype none
module kf_ishift #(
    parameter W      = 32,
    parameter SIGNED = 0,
    parameter LEFT   = 1
) (
    input  wire [W-1:0] a,
    input  wire [W-1:0] b,
    output wire [W-1:0] y
);
    localparam AW = $clog2(W);
    wire [AW-1:0] amt = b[AW-1:0];
    wire [W-1:0] fill = (SIGNED != 0 && a[W-1]) ? {W{1'b1}} : {W{1'b0}};
    // right shift with fill: the ones shifted in come from ~(all-ones >> amt)
    wire [W-1:0] right = (a >> amt) | (fill & ~({W{1'b1}} >> amt));
    assign y = (LEFT != 0) ? (a << amt) : right;
    wire unused_hi = |b[W-1:AW];
endmodule
`default_nettype wire
