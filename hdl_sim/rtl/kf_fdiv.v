// kf_fdiv: IEEE-754 division a / b, round to nearest even, subnormals in and out.
//   Restoring radix-2 division of the normalised significands, BPS quotient bits per pipeline
//   stage; K = NS * BPS >= MW + 3 quotient bits plus the remainder (as sticky) round exactly.
//   Latency LATENCY = NS + 2 clocks (binary32: 9, binary64: 16), one input per clock.
//   NaN (canonical) for NaN operands, 0/0 and inf/inf; inf for x/0 and inf/y; zero for 0/y and
//   x/inf; the sign is sign(a) xor sign(b).
`default_nettype none
module kf_fdiv #(
    parameter EW = 8,
    parameter MW = 23
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           valid_in,
    input  wire [EW+MW:0] a,
    input  wire [EW+MW:0] b,
    output wire           valid_out,
    output wire [EW+MW:0] y
);
    localparam BPS = 4;
    localparam NS = (MW + 3 + BPS - 1) / BPS;
    localparam K = NS * BPS;
    localparam LATENCY = NS + 2;
    localparam XW = EW + 2;
    localparam RW = MW + 2;                    // partial remainder, always < 2 * divisor
    localparam integer BIAS_I = (1 << (EW - 1)) - 1;
    localparam [XW-1:0] BIAS = BIAS_I[XW-1:0];

    wire          sa, na, ia, za, sb, nb, ib, zb;
    wire [XW-1:0] ea, eb;
    wire [MW:0]   ma, mb;
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW), .NORM(1)) u_ua (
        .x(a), .sign(sa), .is_nan(na), .is_inf(ia), .is_zero(za), .exp(ea), .sig(ma));
    kf_unpack #(.EW(EW), .MW(MW), .XW(XW), .NORM(1)) u_ub (
        .x(b), .sign(sb), .is_nan(nb), .is_inf(ib), .is_zero(zb), .exp(eb), .sig(mb));

    wire nan = na | nb | (za & zb) | (ia & ib);
    // stage registers: flags and exponent ride one delay line; divisor, remainder and quotient
    // are registered per stage (separate nets keep event-driven simulators fast)
    localparam MT = 4 + XW;
    wire [MT-1:0] meta0 = {nan, ia | zb, za | ib, sa ^ sb, ea - eb + BIAS};
    wire [MT-1:0] meta;
    kf_pipe #(.W(MT), .N(NS + 1)) u_meta (.clk(clk), .d(meta0), .q(meta));
    reg [MW:0]   dvs0;
    reg [RW-1:0] rem0;
    reg [K-1:0]  quot0;
    always @(posedge clk) begin
        dvs0 <= mb;
        rem0 <= {1'b0, ma};
        quot0 <= {K{1'b0}};
    end

    genvar g;
    generate
        for (g = 0; g < NS; g = g + 1) begin : g_stage
            wire [MW:0]   dvs;
            wire [RW-1:0] rem_in;
            wire [K-1:0]  quot_in;
            if (g == 0) begin : g_first
                assign dvs = dvs0;
                assign rem_in = rem0;
                assign quot_in = quot0;
            end else begin : g_next
                assign dvs = g_stage[g-1].dvs_q;
                assign rem_in = g_stage[g-1].rem_q;
                assign quot_in = g_stage[g-1].quot_q;
            end
            reg [RW-1:0] rem;
            reg [K-1:0]  quot;
            integer i;
            always @* begin
                rem = rem_in;
                quot = quot_in;
                for (i = 0; i < BPS; i = i + 1) begin
                    if (rem >= {1'b0, dvs}) begin
                        rem = rem - {1'b0, dvs};
                        quot = {quot[K-2:0], 1'b1};
                    end else begin
                        quot = {quot[K-2:0], 1'b0};
                    end
                    rem = rem << 1;
                end
            end
            reg [MW:0]   dvs_q;
            reg [RW-1:0] rem_q;
            reg [K-1:0]  quot_q;
            always @(posedge clk) begin
                dvs_q <= dvs;
                rem_q <= rem;
                quot_q <= quot;
            end
        end
    endgenerate

    wire [RW-1:0] rem_f = g_stage[NS-1].rem_q;
    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(K), .XW(XW)) u_round (
        .nan(meta[MT-1]), .inf(meta[MT-2]), .zero(meta[MT-3]), .sign(meta[MT-4]),
        .exp(meta[XW-1:0]), .sig(g_stage[NS-1].quot_q), .sticky(rem_f != {RW{1'b0}}), .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_pr (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
    wire unused_dvs = |g_stage[NS-1].dvs_q;
endmodule
`default_nettype wire
