// kf_pipe: N-stage data delay line (N >= 1), no reset; q is d delayed by N clocks.
`default_nettype none
module kf_pipe #(
    parameter W = 1,
    parameter N = 1
) (
    input  wire         clk,
    input  wire [W-1:0] d,
    output wire [W-1:0] q
);
    reg [W*N-1:0] r;
    generate
        if (N == 1) begin : g_one
            always @(posedge clk) r <= d;
        end else begin : g_many
            always @(posedge clk) r <= {r[W*(N-1)-1:0], d};
        end
    endgenerate
    assign q = r[W*N-1 -: W];
endmodule
`default_nettype wire
