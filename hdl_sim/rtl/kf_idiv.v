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

    wire sa = (SIGNED != 0) & a[W-1];
    wire sb = (SIGNED != 0) & b[W-1];
    wire [W-1:0] ma = sa ? ({W{1'b0}} - a) : a;
    wire [W-1:0] mb = sb ? ({W{1'b0}} - b) : b;
    // signs and the zero-divisor flag ride one delay line; divisor, remainder and
    // dividend/quotient are registered per stage (separate nets keep event-driven simulators fast)
    wire [2:0] meta;
    kf_pipe #(.W(3), .N(NS + 1)) u_meta (
        .clk(clk), .d({sa ^ sb, sa, b == {W{1'b0}}}), .q(meta));
    reg [W-1:0] dvs0;
    reg [W-1:0] dq0;
    always @(posedge clk) begin
        dvs0 <= mb;
        dq0 <= ma;
    end

    genvar g;
    generate
        for (g = 0; g < NS; g = g + 1) begin : g_stage
            wire [W-1:0] dvs;
            wire [W-1:0] rem_in;
            wire [W-1:0] dq_in;
            if (g == 0) begin : g_first
                assign dvs = dvs0;
                assign rem_in = {W{1'b0}};
                assign dq_in = dq0;
            end else begin : g_next
                assign dvs = g_stage[g-1].dvs_q;
                assign rem_in = g_stage[g-1].rem_q;
                assign dq_in = g_stage[g-1].dq_q;
            end
            reg [W:0]   r2;
            reg [W-1:0] rem;
            reg [W-1:0] dq;
            integer i;
            always @* begin
                rem = rem_in;
                dq = dq_in;
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
            reg [W-1:0] dvs_q;
            reg [W-1:0] rem_q;
            reg [W-1:0] dq_q;
            always @(posedge clk) begin
                dvs_q <= dvs;
                rem_q <= rem;
                dq_q <= dq;
            end
        end
    endgenerate

    wire [W-1:0] q = g_stage[NS-1].dq_q;
    wire [W-1:0] r = g_stage[NS-1].rem_q;
    wire [W-1:0] quo = meta[0] ? {W{1'b0}} : (meta[2] ? ({W{1'b0}} - q) : q);
    wire [W-1:0] rem_out = meta[1] ? ({W{1'b0}} - r) : r;
    kf_pipe #(.W(W), .N(1)) u_pr (.clk(clk), .d((REM != 0) ? rem_out : quo), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
    wire unused_dvs = |g_stage[NS-1].dvs_q;
endmodule
`default_nettype wire
