// kf_fminmax: IEEE 754-2019 minimum (MAX = 0) / maximum (MAX = 1), combinational, latency 0.
//   Any NaN operand gives the canonical quiet NaN; -0 < +0.
`default_nettype none
module kf_fminmax #(
    parameter EW  = 8,
    parameter MW  = 23,
    parameter MAX = 0
) (
    input  wire [EW+MW:0] a,
    input  wire [EW+MW:0] b,
    output wire [EW+MW:0] y
);
    localparam W = EW + MW + 1;
    localparam [W-1:0] QNAN = {1'b0, {EW{1'b1}}, 1'b1, {(MW-1){1'b0}}};
    wire nan_a = (a[W-2:MW] == {EW{1'b1}}) & (a[MW-1:0] != {MW{1'b0}});
    wire nan_b = (b[W-2:MW] == {EW{1'b1}}) & (b[MW-1:0] != {MW{1'b0}});
    wire [W-1:0] ka = a[W-1] ? ~a : {1'b1, a[W-2:0]};
    wire [W-1:0] kb = b[W-1] ? ~b : {1'b1, b[W-2:0]};
    wire a_less = ka < kb;
    assign y = (nan_a | nan_b) ? QNAN : ((a_less ^ (MAX != 0)) ? a : b);
endmodule
`default_nettype wire
