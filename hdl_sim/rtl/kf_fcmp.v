// kf_fcmp: IEEE-754 quiet comparisons (combinational, latency 0).
//   A NaN operand makes every relation false except ne; -0 == +0.
`default_nettype none
module kf_fcmp #(
    parameter EW = 8,
    parameter MW = 23
) (
    input  wire [EW+MW:0] a,
    input  wire [EW+MW:0] b,
    output wire           eq,
    output wire           ne,
    output wire           lt,
    output wire           le,
    output wire           gt,
    output wire           ge
);
    localparam W = EW + MW + 1;
    wire nan_a = (a[W-2:MW] == {EW{1'b1}}) & (a[MW-1:0] != {MW{1'b0}});
    wire nan_b = (b[W-2:MW] == {EW{1'b1}}) & (b[MW-1:0] != {MW{1'b0}});
    wire unord = nan_a | nan_b;
    wire zeros = (a[W-2:0] == {(W-1){1'b0}}) & (b[W-2:0] == {(W-1){1'b0}});
    // order-preserving keys: unsigned ka < kb iff a < b (with -0 < +0)
    wire [W-1:0] ka = a[W-1] ? ~a : {1'b1, a[W-2:0]};
    wire [W-1:0] kb = b[W-1] ? ~b : {1'b1, b[W-2:0]};
    assign eq = ~unord & (zeros | (a == b));
    assign ne = ~eq;
    assign lt = ~unord & ~zeros & (ka < kb);
    assign gt = ~unord & ~zeros & (ka > kb);
    assign le = lt | eq;
    assign ge = gt | eq;
endmodule
`default_nettype wire
