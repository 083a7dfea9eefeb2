// kf_idiv: W-bit integer division (REM = 0) or remainder (REM = 1) with total semantics.
//   SIGNED = 1: quotient truncated toward zero, remainder with the dividend's sign,
//   MIN / -1 = MIN, MIN % -1 = 0.  Both: x / 0 = 0, x % 0 = x.
//   Restoring division of the magnitudes, BPS quotient bits per pipeline stage.
//   Latency LATENCY = W / BPS + 2 clocks (32 bit: 10, 64 bit: 18), one input per clock.
`default_nettype none
module kf_idiv #(
    parameter W      = 32,
    parameter SIGNED = 1,
    parameter REM    = 0
) (
    input  wire         clk,
    input  wire         rst,
    input  wire         valid_in,
    input  wire [W-1:0] a,
    input  wire [W-1:0] b,
    output wire         valid_out,
    output wire [W-1:0] y
);
    localparam BPS = 4;
    localparam NS = W / BPS;
    localparam LATENCY = NS + 2;
    localparam ST = 3 + 3 * W;  // {qneg, rneg, bzero, divisor, rem, dividend/quotient}

    wire sa = (SIGNED != 0) & a[W-1];
    wire sb = (SIGNED != 0) & b[W-1];
    wire [W-1:0] ma = sa ? ({W{1'b0}} - a) : a;
    wire [W-1:0] mb = sb ? ({W{1'b0}} - b) : b;
    wire [ST-1:0] s0 = {sa ^ sb, sa, b == {W{1'b0}}, mb, {W{1'b0}}, ma};
    wire [(NS+1)*ST-1:0] chain;
    kf_pipe #(.W(ST), .N(1)) u_p0 (.clk(clk), .d(s0), .q(chain[ST-1:0]));

    genvar g;
    generate
        for (g = 0; g < NS; g = g + 1) begin : g_stage
            wire [ST-1:0] cur = chain[g*ST +: ST];
            wire [W-1:0]  dvs = cur[2*W +: W];
            reg  [W:0]    r2;
            reg  [W-1:0]  rem;
            reg  [W-1:0]  dq;
            integer i;
            always @* begin
                rem = cur[W +: W];
                dq = cur[W-1:0];
                for (i = 0; i < BPS; i = i + 1) begin
                    r2 = {rem, dq[W-1]};
                    dq = {dq[W-2:0], 1'b0};
                    if (r2 >= {1'b0, dvs}) begin
                        r2 = r2 - {1'b0, dvs};
                        dq[0] = 1'b1;
                    end
                    rem = r2[W-1:0];
                end
            end
            kf_pipe #(.W(ST), .N(1)) u_ps (
                .clk(clk), .d({cur[ST-1 -: 3+W], rem, dq}), .q(chain[(g+1)*ST +: ST]));
        end
    endgenerate

    wire [ST-1:0] fin = chain[NS*ST +: ST];
    wire [W-1:0]  q = fin[W-1:0];
    wire [W-1:0]  r = fin[W +: W];
    wire [W-1:0]  quo = fin[ST-3] ? {W{1'b0}} : (fin[ST-1] ? ({W{1'b0}} - q) : q);
    wire [W-1:0]  rem_out = fin[ST-2] ? ({W{1'b0}} - r) : r;
    kf_pipe #(.W(W), .N(1)) u_pr (.clk(clk), .d((REM != 0) ? rem_out : quo), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
    wire unused_dvs = |fin[2*W +: W];
endmodule
`default_nettype wire
