// kf_vpipe: N-stage valid delay line (N >= 1) with synchronous active-high reset.
`default_nettype none
module kf_vpipe #(
    parameter N = 1
) (
    input  wire clk,
    input  wire rst,
    input  wire d,
    output wire q
);
    reg [N-1:0] r;
    generate
        if (N == 1) begin : g_one
            always @(posedge clk) r <= rst ? 1'b0 : d;
        end else begin : g_many
            always @(posedge clk) r <= rst ? {N{1'b0}} : {r[N-2:0], d};
        end
    endgenerate
    assign q = r[N-1];
endmodule
`default_nettype wire
