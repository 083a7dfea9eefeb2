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
    localparam ST = 4 + XW + (MW + 1) + RW + K;  // {nan, inf, zero, sign, exp, dvs, rem, quot}
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
    wire [ST-1:0] s0 = {nan, ia | zb, za | ib, sa ^ sb, ea - eb + BIAS, mb, 1'b0, ma,
                        {K{1'b0}}};
    wire [(NS+1)*ST-1:0] chain;
    kf_pipe #(.W(ST), .N(1)) u_p0 (.clk(clk), .d(s0), .q(chain[ST-1:0]));

    genvar g;
    generate
        for (g = 0; g < NS; g = g + 1) begin : g_stage
            wire [ST-1:0] cur = chain[g*ST +: ST];
            wire [MW:0]   dvs = cur[RW+K +: MW+1];
            reg  [RW-1:0] rem;
            reg  [K-1:0]  quot;
            integer i;
            always @* begin
                rem = cur[K +: RW];
                quot = cur[K-1:0];
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
            kf_pipe #(.W(ST), .N(1)) u_ps (
                .clk(clk), .d({cur[ST-1 -: 4+XW+MW+1], rem, quot}), .q(chain[(g+1)*ST +: ST]));
        end
    endgenerate

    wire [ST-1:0] fin = chain[NS*ST +: ST];
    wire [EW+MW:0] r;
    kf_round #(.EW(EW), .MW(MW), .SW(K), .XW(XW)) u_round (
        .nan(fin[ST-1]), .inf(fin[ST-2]), .zero(fin[ST-3]), .sign(fin[ST-4]),
        .exp(fin[ST-5 -: XW]), .sig(fin[K-1:0]), .sticky(fin[K +: RW] != {RW{1'b0}}), .y(r));
    kf_pipe #(.W(EW + MW + 1), .N(1)) u_pr (.clk(clk), .d(r), .q(y));
    kf_vpipe #(.N(LATENCY)) u_v (.clk(clk), .rst(rst), .d(valid_in), .q(valid_out));
    wire unused_dvs = |fin[RW+K +: MW+1];
endmodule
`default_nettype wire
